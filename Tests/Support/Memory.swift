import Foundation

/// The resident memory of this process in bytes, where the platform reports it (Linux) and
/// it means something.
///
/// Under a sanitizer, which keeps freed memory in quarantine or shadows it, resident memory says
/// little, and this is `nil` (see ``TestSize/underSanitizer``).
public func residentMemory() -> Int? {
    guard !TestSize.underSanitizer else {
        return nil
    }
    #if os(Linux)  // /proc/self/statm is Linux's; elsewhere the memory tests are skipped
        guard let statm = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else {
            return nil
        }
        let fields = statm.split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else {
            return nil
        }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    #else
        return nil
    #endif
}

/// The figure that a measuring exit test's child printed as a line `name: <integer>`, if any.
///
/// A child that measures prints its figures this way and exits successfully; the parent reads
/// them here and judges them with `#expect`, so a failure shows the figure it failed on. (Had
/// the child judged, a failed exit test would return no output to show.)
public func measuredFigure(_ name: String, in output: String) -> Int? {
    let prefix = name + ": "
    return output.split(separator: "\n").lazy.compactMap { line in
        line.hasPrefix(prefix) ? Int(line.dropFirst(prefix.count)) : nil
    }.first
}

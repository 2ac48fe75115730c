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

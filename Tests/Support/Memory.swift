import Foundation

/// The resident memory of this process in bytes, where the platform reports it (Linux) and
/// it means something.
///
/// Under a sanitizer, which keeps freed memory in quarantine or shadows it, resident memory says
/// little; CI names the sanitizer in `DEFERRED_SANITIZER` for such runs, and then this is `nil`.
public func residentMemory() -> Int? {
    guard ProcessInfo.processInfo.environment["DEFERRED_SANITIZER"] == nil else {
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

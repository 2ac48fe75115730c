import Foundation

/// The system's identifier of the calling thread: unique among running threads, but reused
/// for threads started after it ends.
var currentThreadIdentifier: UInt {
    #if canImport(Darwin)
        // Darwin's pthread_t is a pointer, Linux's an integer.
        UInt(bitPattern: pthread_self())
    #else
        UInt(pthread_self())
    #endif
}

/// Gives the calling thread `name`, for Foundation and for the operating system.
///
/// Debuggers and tools show the system's name. On Linux a name set before `start()` does
/// not reach the thread, and Foundation's setter does not always reach the system either,
/// so the name is also written where Linux keeps it.
func nameCurrentThread(_ name: String) {
    Thread.current.name = name
    #if os(Linux)
        // Linux only: /proc/thread-self exists there; Darwin's Foundation sets the name itself.
        // The longest prefix of whole characters within 15 bytes: a prefix cut inside a character
        // is no string, and the name would silently not be written.
        var prefix = Substring(name)
        while prefix.utf8.count > 15 {
            prefix = prefix.dropLast()
        }
        try? String(prefix).write(toFile: "/proc/thread-self/comm", atomically: false, encoding: .utf8)
    #endif
}

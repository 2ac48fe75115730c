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

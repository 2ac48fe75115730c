import Foundation

/// Runs a command found on the path and returns its standard output.
///
/// - Parameters:
///   - command: The command's name.
///   - arguments: Its arguments.
///   - environment: Its environment; this process's by default.
///   - quiet: Whether to discard its standard error instead of passing it through.
/// - Returns: The standard output, trimmed, or nil if the command could not start or failed.
func output(
    of command: String, _ arguments: [String], environment: [String: String]? = nil, quiet: Bool = false
) -> String? {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = [command] + arguments
    if let environment {
        process.environment = environment
    }
    let pipe = Pipe()
    process.standardOutput = pipe
    if quiet {
        process.standardError = FileHandle.nullDevice
    }
    guard (try? process.run()) != nil else {
        return nil
    }
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    guard process.terminationStatus == 0 else {
        return nil
    }
    return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
}

import Foundation

/// What stops a command-line tool: a message, and whether it was a usage error (exit 2, with the
/// usage text) rather than a failure (exit 1).
public struct ToolFailure: Error {
    public let message: String
    public let usage: Bool
    public init(_ message: String, usage: Bool = false) {
        self.message = message
        self.usage = usage
    }
}

/// Walks the arguments, handing out flags and their values.
public struct ArgumentCursor {
    private let arguments: [String]
    private var index = -1

    public init(_ arguments: [String]) { self.arguments = arguments }

    /// The next argument, or `nil` at the end.
    public mutating func next() -> String? {
        index += 1
        return index < arguments.count ? arguments[index] : nil
    }

    /// The value after `flag`.
    public mutating func value(for flag: String) throws(ToolFailure) -> String {
        guard let v = next() else { throw ToolFailure("\(flag) needs a value", usage: true) }
        return v
    }

    /// Takes `argument` as the tool's one file operand: an unknown option or a second file is a
    /// usage error.
    public func operand(_ argument: String, into path: inout String?) throws(ToolFailure) {
        if argument.hasPrefix("-") && argument.count > 1 { throw ToolFailure("unknown option \(argument)", usage: true) }
        guard path == nil else { throw ToolFailure("give one audio file", usage: true) }
        path = argument
    }

    /// The value after `flag` as a number that `valid` accepts; `expected` says what it takes.
    public mutating func number<T: LosslessStringConvertible>(for flag: String, _ expected: String, _ valid: (T) -> Bool = { _ in true }) throws(ToolFailure) -> T {
        let text = try value(for: flag)
        guard let n = T(text), valid(n) else { throw ToolFailure("\(flag) takes \(expected), not '\(text)'") }
        return n
    }
}

/// Runs a tool's body and exits: 0, or 1 (2 for a usage error, with `usage`) after printing
/// "`name`: message" on standard error.
public func runTool(_ name: String, usage: String, _ body: () throws(ToolFailure) -> Void) -> Never {
    do {
        try body()
        exit(0)
    } catch {
        FileHandle.standardError.write(Data("\(name): \(error.message)\n".utf8))
        if error.usage { FileHandle.standardError.write(Data(usage.utf8)) }
        exit(error.usage ? 2 : 1)
    }
}

/// Prints the usage text on standard output and exits 0 (for -h).
public func printUsageAndExit(_ usage: String) -> Never {
    print(usage, terminator: "")
    exit(0)
}

/// A terminal progress line: rewrites the current line of standard error.
public func progressLine(_ text: String, level: Float) {
    let bar = String(repeating: "#", count: min(30, max(0, Int((Double(level) + 60) / 2)))).padding(toLength: 30, withPad: " ", startingAt: 0)
    FileHandle.standardError.write(Data(("\r" + text + String(format: "  %6.1f dB ", level) + bar).utf8))
}

/// Whether standard error is a terminal (progress lines only then).
public var standardErrorIsTerminal: Bool { isatty(2) != 0 }

public import Foundation

// Linux has no CoreFoundation module for Swift code, yet Apple's Audio Queue signatures take a
// `CFRunLoop?` and a `CFString?`. These definitions keep such code compiling unchanged: `CFRunLoop`
// wraps Foundation's `RunLoop`, and `CFString` is `NSString` (as on Apple's platforms, where the
// two are toll-free bridged: one reference, `"name" as CFString` and `cfString as String` work), so
// `nil, nil`, `CFRunLoopGetCurrent()` and `CFRunLoopMode.commonModes.rawValue` all type-check as on
// Apple's platforms.

/// A run loop, as Apple's `CFRunLoop`: a wrapper around the Foundation `RunLoop` of one thread.
public final class CFRunLoop: @unchecked Sendable, Hashable {
    /// The Foundation run loop this wraps.
    public let runLoop: RunLoop
    public init(_ runLoop: RunLoop) { self.runLoop = runLoop }
    public static func == (a: CFRunLoop, b: CFRunLoop) -> Bool { a.runLoop === b.runLoop }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(runLoop)) }
}

/// Apple's `CFString`: on Linux Foundation's `NSString`, the class Apple's is bridged to. What
/// takes a `CFString?` (`kAudioQueueProperty_CurrentDevice`) takes one reference, as Apple's does.
public typealias CFString = NSString

/// A run loop mode, as Apple's `CFRunLoopMode` (its string is immutable).
public struct CFRunLoopMode: RawRepresentable, Hashable, @unchecked Sendable {
    public var rawValue: CFString
    public init(rawValue: CFString) { self.rawValue = rawValue }
    public init(_ rawValue: CFString) { self.rawValue = rawValue }
    public static let defaultMode = CFRunLoopMode(rawValue: RunLoop.Mode.default.rawValue as CFString)
    public static let commonModes = CFRunLoopMode(rawValue: RunLoop.Mode.common.rawValue as CFString)
}

public let kCFRunLoopDefaultMode: CFRunLoopMode = .defaultMode
public let kCFRunLoopCommonModes: CFRunLoopMode = .commonModes

/// The run loop of the calling thread.
@discardableResult
public func CFRunLoopGetCurrent() -> CFRunLoop { CFRunLoop(RunLoop.current) }

/// The main thread's run loop.
@discardableResult
public func CFRunLoopGetMain() -> CFRunLoop { CFRunLoop(RunLoop.main) }

/// How ``CFRunLoopRunInMode(_:_:_:)`` returned.
public enum CFRunLoopRunResult: Int32, Sendable {
    case finished = 1
    case stopped = 2
    case timedOut = 3
    case handledSource = 4
}

/// Runs the current thread's run loop in `mode` for up to `seconds`, as Apple's function does;
/// with `returnAfterSourceHandled` it returns after the first event it handles.
@discardableResult
public func CFRunLoopRunInMode(_ mode: CFRunLoopMode?, _ seconds: TimeInterval, _ returnAfterSourceHandled: Bool) -> CFRunLoopRunResult {
    let runMode = RunLoop.Mode(mode.map { $0.rawValue as String } ?? RunLoop.Mode.default.rawValue)
    let deadline = Date(timeIntervalSinceNow: seconds)
    repeat {
        let handled = RunLoop.current.run(mode: runMode, before: deadline)
        if !handled { return .finished }
        if returnAfterSourceHandled { return .handledSource }
    } while Date() < deadline
    return .timedOut
}

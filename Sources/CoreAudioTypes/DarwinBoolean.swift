/// The Darwin `Boolean` type (an 8-bit 0 or 1) that Apple's C APIs use for out-parameters such as
/// `AudioQueueGetCurrentTime`'s discontinuity flag. Linux has no Darwin overlay, so it lives here.
@frozen
public struct DarwinBoolean: ExpressibleByBooleanLiteral, Sendable, Hashable, CustomStringConvertible {
    @usableFromInline var value: UInt8

    public init(_ value: Bool) { self.value = value ? 1 : 0 }
    public init(booleanLiteral value: Bool) { self.init(value) }

    /// The value as a Swift `Bool`.
    public var boolValue: Bool { value != 0 }
    public var description: String { boolValue.description }
}

extension Bool {
    public init(_ value: DarwinBoolean) { self = value.boolValue }
}

package import CoreAudioTypes
import Synchronization

/// A failed file, converter or format call: Apple's status and, for tools, tests and logs, what
/// was wrong in words.
package struct AudioFailure: Error {
    package let status: OSStatus
    package let reason: String
    package init(_ status: OSStatus, _ reason: String) {
        self.status = status
        self.reason = reason
    }
}

/// A value's bytes, as property getters copy them out.
func bytes<T>(_ value: T) -> [UInt8] { withUnsafeBytes(of: value) { Array($0) } }

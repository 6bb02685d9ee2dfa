/// A status code as Apple's audio APIs return it: `0` (``noErr``) for success, otherwise a negative
/// number or a four-character code.
public typealias OSStatus = Int32

/// Four ASCII characters packed big-endian into 32 bits, as Apple's format and property IDs are.
public typealias FourCharCode = UInt32

/// Success.
public let noErr: OSStatus = 0

// Errors shared by the audio APIs (CoreAudioBaseTypes.h).
public let kAudio_UnimplementedError: OSStatus = -4
public let kAudio_FileNotFoundError: OSStatus = -43
public let kAudio_FilePermissionError: OSStatus = -54
public let kAudio_TooManyFilesOpenError: OSStatus = -42
public let kAudio_BadFilePathError: OSStatus = OSStatus(bitPattern: fourCC("!pth"))
public let kAudio_ParamError: OSStatus = -50
public let kAudio_MemFullError: OSStatus = -108

/// Packs a four-character literal such as `"lpcm"` into a ``FourCharCode``.
///
/// Characters past the fourth are ignored; a shorter string is padded with spaces, as Apple's
/// codes like `"aac "` are.
@inlinable
public func fourCC(_ string: String) -> FourCharCode {
    var code: UInt32 = 0
    var count = 0
    for byte in string.utf8.prefix(4) {
        code = (code << 8) | UInt32(byte)
        count += 1
    }
    while count < 4 {
        code = (code << 8) | 0x20
        count += 1
    }
    return code
}

extension UInt32 {
    /// The four characters of a ``FourCharCode`` (`'lpcm'`), or the decimal number when they are
    /// not printable ASCII, as `afinfo` and Apple's error logs print codes.
    public var fourCharCodeString: String {
        let bytes = [UInt8(self >> 24), UInt8((self >> 16) & 0xFF), UInt8((self >> 8) & 0xFF), UInt8(self & 0xFF)]
        guard bytes.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) else { return String(self) }
        return String(decoding: bytes, as: UTF8.self)
    }
}

extension Int32 {
    /// An ``OSStatus`` as Apple's tools print it: the four characters when it is a code such as
    /// `'fmt?'`, else the number.
    public var osStatusDescription: String {
        let code = UInt32(bitPattern: self)
        let text = code.fourCharCodeString
        return text == String(code) ? String(self) : "'\(text)'"
    }
}

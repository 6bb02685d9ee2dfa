// The result codes of Apple's AudioFormat.h, shared by every API that judges a stream description.

public let kAudioFormatUnspecifiedError: OSStatus = OSStatus(bitPattern: fourCC("what"))
public let kAudioFormatUnsupportedPropertyError: OSStatus = OSStatus(bitPattern: fourCC("prop"))
public let kAudioFormatBadPropertySizeError: OSStatus = OSStatus(bitPattern: fourCC("!siz"))
public let kAudioFormatBadSpecifierSizeError: OSStatus = OSStatus(bitPattern: fourCC("!spc"))
/// The stream description names a format this API cannot handle (`'fmt?'`).
public let kAudioFormatUnsupportedDataFormatError: OSStatus = OSStatus(bitPattern: fourCC("fmt?"))
public let kAudioFormatUnknownFormatError: OSStatus = OSStatus(bitPattern: fourCC("!fmt"))

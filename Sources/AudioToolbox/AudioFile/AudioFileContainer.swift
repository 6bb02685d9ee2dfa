import CoreAudioTypes

/// One file type's reader/writer behind the AudioFile API. Implementations report failures as
/// Apple's `kAudioFile*Error` codes through ``AudioFailure``.
protocol AudioFileContainer: AnyObject {
    var fileType: AudioFileTypeID { get }
    var format: AudioStreamBasicDescription { get }
    var packetCount: Int64 { get }
    var dataByteCount: Int64 { get }
    var maximumPacketSize: Int { get }
    var dataOffset: Int64 { get }
    var magicCookie: [UInt8] { get }
    /// Apple's `AudioChannelLayout` bytes (native endian), when the file has a layout.
    var channelLayout: [UInt8]? { get }
    var packetTableInfo: AudioFilePacketTableInfo? { get }
    var info: [String: String] { get }
    /// Bits per second of the audio data.
    var bitRate: Int { get }
    /// `kAudioFilePropertyIsOptimized`: the audio data ends the file and the header states its
    /// size, so audio can be appended with nothing to move.
    var isOptimized: Bool { get }
    /// Audio streams in the file (`kAudioFilePropertyAudioTrackCount`).
    var audioTrackCount: Int { get }
    /// `kAudioFilePropertyDeferSizeUpdates`: the header's sizes are written only when the file closes.
    var deferSizeUpdates: Bool { get }
    func setDeferSizeUpdates(_ deferred: Bool) throws(AudioFailure)
    /// Size in bytes of packet `index` and its frame count (for VBR formats); `nil` when out of range.
    func packetSize(_ index: Int64) -> (bytes: Int, frames: Int)?
    /// Copies the bytes of `count` packets starting at `start` to `destination`; returns bytes copied.
    func readPacketBytes(start: Int64, count: Int, into destination: UnsafeMutableRawPointer) throws(AudioFailure) -> Int
    func writePackets(
        start: Int64, count: Int, bytes: UnsafeRawBufferPointer, descriptions: UnsafePointer<AudioStreamPacketDescription>?
    ) throws(AudioFailure)
    func readBytes(start: Int64, count: Int, into destination: UnsafeMutableRawPointer) throws(AudioFailure) -> Int
    func writeBytes(start: Int64, bytes: UnsafeRawBufferPointer) throws(AudioFailure)
    func setMagicCookie(_ cookie: [UInt8]) throws(AudioFailure)
    func setChannelLayout(_ layout: [UInt8]) throws(AudioFailure)
    func setPacketTableInfo(_ info: AudioFilePacketTableInfo) throws(AudioFailure)
    func setInfo(_ info: [String: String]) throws(AudioFailure)
    func setDataFormat(_ format: AudioStreamBasicDescription) throws(AudioFailure)
    /// Finishes headers and closes. Called once.
    func close() throws(AudioFailure)
}


extension AudioStreamBasicDescription {
    /// Bytes per packet when constant, else 0 (VBR).
    var isVariablePacketSize: Bool { mBytesPerPacket == 0 || mFramesPerPacket == 0 }
}

// AVFAudio builds on AudioToolbox and re-exports it, as Apple's framework does. Here so far:
// AVAudioFormat, AVAudioChannelLayout, AVAudioPCMBuffer, AVAudioCompressedBuffer, AVAudioFile and
// the settings keys. The session, the player and the recorder are not here yet (REMAINING.md).
@_exported public import AudioToolbox

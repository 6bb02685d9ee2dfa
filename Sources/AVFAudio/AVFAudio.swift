// AVFAudio builds on AudioToolbox and re-exports it, as Apple's framework does: AVAudioFormat,
// AVAudioChannelLayout, AVAudioPCMBuffer, AVAudioCompressedBuffer, AVAudioFile, AVAudioConverter
// and the settings keys; AVAudioSession and AVAudioApplication; AVAudioPlayer and AVAudioRecorder;
// AVAudioEngine and its nodes (Engine/). What is still missing is listed in REMAINING.md.
@_exported public import AudioToolbox

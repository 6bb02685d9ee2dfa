// The umbrella: on Linux only the audio part of AVFoundation exists, which is AVFAudio.
@_exported public import AVFAudio

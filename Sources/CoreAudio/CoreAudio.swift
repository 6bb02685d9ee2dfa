// CoreAudio: the device API of Apple's HAL (`AudioObject*`, `AudioDevice*` IOProcs) on the sound
// server's sinks and sources. It re-exports CoreAudioTypes, as Apple's does, and AudioToolbox
// re-exports it, so `import AudioToolbox` and `import AVFoundation` see it too.
//
// The object model, mapped onto the server (PulseAudio or pipewire-pulse, through AudioHAL):
// - `kAudioObjectSystemObject` (1) is the server: its devices and its defaults.
// - Each sink is a device with an output scope, each source (monitors of sinks included) a device
//   with an input scope; each device owns one stream in its scope. IDs are handed out in order as
//   devices are first seen and stay while the device exists; a device that comes back gets a new
//   one, as on a Mac.
// - The UID is the server's name for the device (`alsa_output.pci-0000_00_1f.3.analog-stereo`),
//   the name its description.
// - Property values come from the server as it is now; listeners fire from a notification thread
//   of this module when the server reports a change (its subscription events).
@_exported public import CoreAudioTypes
@_exported public import CCoreAudio

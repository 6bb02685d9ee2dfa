// AVFAudio builds on AudioToolbox and re-exports it, as Apple's framework does. The player, the
// recorder, the session and the value types land here; until then this module carries only the
// re-export (see REMAINING.md for what is absent).
@_exported public import AudioToolbox

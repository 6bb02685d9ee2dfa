// The tests, the benchmark and rtcheck import this module alone and get the server fixture and
// the signals with it.
@_exported public import AudioSignals
@_exported public import PrivateSoundServer

// `AudioTimeStamp`, `SMPTETime`, and the option sets `AudioTimeStampFlags` and `SMPTETimeFlags`
// are declared in C (CCoreAudioTypes) with Apple's layout. Host time on Linux is
// `CLOCK_MONOTONIC` in nanoseconds (see ``AudioGetCurrentHostTime()``), where Apple's is
// `mach_absolute_time`.

public let kAudioTimeStampNothingValid = AudioTimeStampFlags([])
public let kAudioTimeStampSampleTimeValid = AudioTimeStampFlags.sampleTimeValid
public let kAudioTimeStampHostTimeValid = AudioTimeStampFlags.hostTimeValid
public let kAudioTimeStampRateScalarValid = AudioTimeStampFlags.rateScalarValid
public let kAudioTimeStampWordClockTimeValid = AudioTimeStampFlags.wordClockTimeValid
public let kAudioTimeStampSMPTETimeValid = AudioTimeStampFlags.smpteTimeValid
public let kAudioTimeStampSampleHostTimeValid = AudioTimeStampFlags.sampleHostTimeValid

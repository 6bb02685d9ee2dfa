public import CoreAudioTypes
public import CAudioQueueTypes

// The types, constants and result codes of Apple's AudioComponent.h, AUComponent.h,
// AudioUnitProperties.h and AudioOutputUnit.h that this module implements, with Apple's names,
// values and imported shapes. `AudioUnitRenderActionFlags` is declared in C (CAudioQueueTypes).

/// A kind of audio unit this process can make (``AudioComponentFindNext(_:_:)``).
public typealias AudioComponent = OpaquePointer
/// An audio unit made from a component.
public typealias AudioComponentInstance = OpaquePointer
public typealias AudioUnit = AudioComponentInstance
public typealias AudioUnitPropertyID = UInt32
public typealias AudioUnitScope = UInt32
public typealias AudioUnitElement = UInt32
public typealias AudioUnitParameterID = UInt32
public typealias AudioUnitParameterValue = Float32

/// Says which components a search matches: zero fields match anything.
public struct AudioComponentDescription: Sendable, Equatable {
    public var componentType: OSType
    public var componentSubType: OSType
    public var componentManufacturer: OSType
    public var componentFlags: UInt32
    public var componentFlagsMask: UInt32
    public init() { self.init(componentType: 0, componentSubType: 0, componentManufacturer: 0, componentFlags: 0, componentFlagsMask: 0) }
    public init(componentType: OSType, componentSubType: OSType, componentManufacturer: OSType, componentFlags: UInt32, componentFlagsMask: UInt32) {
        self.componentType = componentType
        self.componentSubType = componentSubType
        self.componentManufacturer = componentManufacturer
        self.componentFlags = componentFlags
        self.componentFlagsMask = componentFlagsMask
    }
}


/// Called to supply audio to an input of a unit (``kAudioUnitProperty_SetRenderCallback``), or to
/// say input is ready on an I/O unit (``kAudioOutputUnitProperty_SetInputCallback``). Runs on the
/// real-time thread: it must not block, allocate or wait.
public typealias AURenderCallback = @convention(c) (
    _ inRefCon: UnsafeMutableRawPointer, _ ioActionFlags: UnsafeMutablePointer<AudioUnitRenderActionFlags>,
    _ inTimeStamp: UnsafePointer<AudioTimeStamp>, _ inBusNumber: UInt32, _ inNumberFrames: UInt32,
    _ ioData: UnsafeMutablePointer<AudioBufferList>?
) -> OSStatus

public struct AURenderCallbackStruct {
    public var inputProc: AURenderCallback?
    public var inputProcRefCon: UnsafeMutableRawPointer?
    public init() {}
    public init(inputProc: AURenderCallback?, inputProcRefCon: UnsafeMutableRawPointer?) {
        self.inputProc = inputProc
        self.inputProcRefCon = inputProcRefCon
    }
}

/// Connects an output of one unit to an input of another (``kAudioUnitProperty_MakeConnection``).
public struct AudioUnitConnection {
    public var sourceAudioUnit: AudioUnit?
    public var sourceOutputNumber: UInt32
    public var destInputNumber: UInt32
    public init() { self.init(sourceAudioUnit: nil, sourceOutputNumber: 0, destInputNumber: 0) }
    public init(sourceAudioUnit: AudioUnit?, sourceOutputNumber: UInt32, destInputNumber: UInt32) {
        self.sourceAudioUnit = sourceAudioUnit
        self.sourceOutputNumber = sourceOutputNumber
        self.destInputNumber = destInputNumber
    }
}

/// Called on the thread that changed a property of a unit.
public typealias AudioUnitPropertyListenerProc = @convention(c) (
    _ inRefCon: UnsafeMutableRawPointer?, _ inUnit: AudioUnit, _ inID: AudioUnitPropertyID, _ inScope: AudioUnitScope,
    _ inElement: AudioUnitElement
) -> Void

// MARK: Component types, subtypes and the manufacturer

public let kAudioUnitType_Output: OSType = fourCC("auou")
public let kAudioUnitType_MusicDevice: OSType = fourCC("aumu")
public let kAudioUnitType_MusicEffect: OSType = fourCC("aumf")
public let kAudioUnitType_FormatConverter: OSType = fourCC("aufc")
public let kAudioUnitType_Effect: OSType = fourCC("aufx")
public let kAudioUnitType_Mixer: OSType = fourCC("aumx")
public let kAudioUnitType_Panner: OSType = fourCC("aupn")
public let kAudioUnitType_Generator: OSType = fourCC("augn")
public let kAudioUnitType_OfflineEffect: OSType = fourCC("auol")
public let kAudioUnitManufacturer_Apple: OSType = fourCC("appl")

public let kAudioUnitSubType_GenericOutput: OSType = fourCC("genr")
public let kAudioUnitSubType_RemoteIO: OSType = fourCC("rioc")
public let kAudioUnitSubType_HALOutput: OSType = fourCC("ahal")
public let kAudioUnitSubType_DefaultOutput: OSType = fourCC("def ")
public let kAudioUnitSubType_SystemOutput: OSType = fourCC("sys ")
public let kAudioUnitSubType_VoiceProcessingIO: OSType = fourCC("vpio")
public let kAudioUnitSubType_NBandEQ: OSType = fourCC("nbeq")
public let kAudioUnitSubType_Delay: OSType = fourCC("dely")
public let kAudioUnitSubType_Reverb2: OSType = fourCC("rvb2")
public let kAudioUnitSubType_Distortion: OSType = fourCC("dist")
public let kAudioUnitSubType_NewTimePitch: OSType = fourCC("nutp")
public let kAudioUnitSubType_Varispeed: OSType = fourCC("vari")
public let kAudioUnitSubType_MultiChannelMixer: OSType = fourCC("mcmx")
public let kAudioUnitSubType_AUConverter: OSType = fourCC("conv")

// MARK: Scopes

public let kAudioUnitScope_Global: AudioUnitScope = 0
public let kAudioUnitScope_Input: AudioUnitScope = 1
public let kAudioUnitScope_Output: AudioUnitScope = 2

// MARK: Properties

public let kAudioUnitProperty_ClassInfo: AudioUnitPropertyID = 0
public let kAudioUnitProperty_MakeConnection: AudioUnitPropertyID = 1
public let kAudioUnitProperty_SampleRate: AudioUnitPropertyID = 2
public let kAudioUnitProperty_ParameterList: AudioUnitPropertyID = 3
public let kAudioUnitProperty_ParameterInfo: AudioUnitPropertyID = 4
public let kAudioUnitProperty_StreamFormat: AudioUnitPropertyID = 8
public let kAudioUnitProperty_ElementCount: AudioUnitPropertyID = 11
public let kAudioUnitProperty_Latency: AudioUnitPropertyID = 12
public let kAudioUnitProperty_SupportedNumChannels: AudioUnitPropertyID = 13
public let kAudioUnitProperty_MaximumFramesPerSlice: AudioUnitPropertyID = 14
public let kAudioUnitProperty_TailTime: AudioUnitPropertyID = 20
public let kAudioUnitProperty_BypassEffect: AudioUnitPropertyID = 21
public let kAudioUnitProperty_LastRenderError: AudioUnitPropertyID = 22
public let kAudioUnitProperty_SetRenderCallback: AudioUnitPropertyID = 23
public let kAudioUnitProperty_FactoryPresets: AudioUnitPropertyID = 24
public let kAudioUnitProperty_RenderQuality: AudioUnitPropertyID = 26
public let kAudioUnitProperty_InPlaceProcessing: AudioUnitPropertyID = 29
public let kAudioUnitProperty_ElementName: AudioUnitPropertyID = 30
public let kAudioUnitProperty_ShouldAllocateBuffer: AudioUnitPropertyID = 51

public let kAudioOutputUnitProperty_CurrentDevice: AudioUnitPropertyID = 2000
public let kAudioOutputUnitProperty_IsRunning: AudioUnitPropertyID = 2001
/// An array of `Int32`, one per output channel: the input channel it takes, or −1 for silence.
/// Implemented by AUConverter only (not by the I/O units).
public let kAudioOutputUnitProperty_ChannelMap: AudioUnitPropertyID = 2002
public let kAudioOutputUnitProperty_EnableIO: AudioUnitPropertyID = 2003
public let kAudioOutputUnitProperty_SetInputCallback: AudioUnitPropertyID = 2005
public let kAudioOutputUnitProperty_HasIO: AudioUnitPropertyID = 2006

// MARK: Parameters

public let kAUNBandEQParam_GlobalGain: AudioUnitParameterID = 0
public let kAUNBandEQParam_BypassBand: AudioUnitParameterID = 1000
public let kAUNBandEQParam_FilterType: AudioUnitParameterID = 2000
public let kAUNBandEQParam_Frequency: AudioUnitParameterID = 3000
public let kAUNBandEQParam_Gain: AudioUnitParameterID = 4000
public let kAUNBandEQParam_Bandwidth: AudioUnitParameterID = 5000
public let kAUNBandEQProperty_NumberOfBands: AudioUnitPropertyID = 2200
public let kAUNBandEQProperty_MaxNumberOfBands: AudioUnitPropertyID = 2201

public let kAUNBandEQFilterType_Parametric: Int = 0
public let kAUNBandEQFilterType_2ndOrderButterworthLowPass: Int = 1
public let kAUNBandEQFilterType_2ndOrderButterworthHighPass: Int = 2
public let kAUNBandEQFilterType_ResonantLowPass: Int = 3
public let kAUNBandEQFilterType_ResonantHighPass: Int = 4
public let kAUNBandEQFilterType_BandPass: Int = 5
public let kAUNBandEQFilterType_BandStop: Int = 6
public let kAUNBandEQFilterType_LowShelf: Int = 7
public let kAUNBandEQFilterType_HighShelf: Int = 8
public let kAUNBandEQFilterType_ResonantLowShelf: Int = 9
public let kAUNBandEQFilterType_ResonantHighShelf: Int = 10
public let kNumAUNBandEQFilterTypes: Int = 11

public let kDelayParam_WetDryMix: AudioUnitParameterID = 0
public let kDelayParam_DelayTime: AudioUnitParameterID = 1
public let kDelayParam_Feedback: AudioUnitParameterID = 2
public let kDelayParam_LopassCutoff: AudioUnitParameterID = 3

public let kReverb2Param_DryWetMix: AudioUnitParameterID = 0
public let kReverb2Param_Gain: AudioUnitParameterID = 1
public let kReverb2Param_MinDelayTime: AudioUnitParameterID = 2
public let kReverb2Param_MaxDelayTime: AudioUnitParameterID = 3
public let kReverb2Param_DecayTimeAt0Hz: AudioUnitParameterID = 4
public let kReverb2Param_DecayTimeAtNyquist: AudioUnitParameterID = 5
public let kReverb2Param_RandomizeReflections: AudioUnitParameterID = 6

public let kDistortionParam_Delay: AudioUnitParameterID = 0
public let kDistortionParam_Decay: AudioUnitParameterID = 1
public let kDistortionParam_DelayMix: AudioUnitParameterID = 2
public let kDistortionParam_Decimation: AudioUnitParameterID = 3
public let kDistortionParam_Rounding: AudioUnitParameterID = 4
public let kDistortionParam_DecimationMix: AudioUnitParameterID = 5
public let kDistortionParam_LinearTerm: AudioUnitParameterID = 6
public let kDistortionParam_SquaredTerm: AudioUnitParameterID = 7
public let kDistortionParam_CubicTerm: AudioUnitParameterID = 8
public let kDistortionParam_PolynomialMix: AudioUnitParameterID = 9
public let kDistortionParam_RingModFreq1: AudioUnitParameterID = 10
public let kDistortionParam_RingModFreq2: AudioUnitParameterID = 11
public let kDistortionParam_RingModBalance: AudioUnitParameterID = 12
public let kDistortionParam_RingModMix: AudioUnitParameterID = 13
public let kDistortionParam_SoftClipGain: AudioUnitParameterID = 14
public let kDistortionParam_FinalMix: AudioUnitParameterID = 15

public let kVarispeedParam_PlaybackRate: AudioUnitParameterID = 0
public let kVarispeedParam_PlaybackCents: AudioUnitParameterID = 1

public let kNewTimePitchParam_Rate: AudioUnitParameterID = 0
public let kNewTimePitchParam_Pitch: AudioUnitParameterID = 1
public let kNewTimePitchParam_Overlap: AudioUnitParameterID = 4
public let kNewTimePitchParam_EnablePeakLocking: AudioUnitParameterID = 6

public let kMultiChannelMixerParam_Volume: AudioUnitParameterID = 0
public let kMultiChannelMixerParam_Enable: AudioUnitParameterID = 1
public let kMultiChannelMixerParam_Pan: AudioUnitParameterID = 2

// MARK: Result codes

public let kAudioUnitErr_InvalidProperty: OSStatus = -10879
public let kAudioUnitErr_InvalidParameter: OSStatus = -10878
public let kAudioUnitErr_InvalidElement: OSStatus = -10877
public let kAudioUnitErr_NoConnection: OSStatus = -10876
public let kAudioUnitErr_FailedInitialization: OSStatus = -10875
public let kAudioUnitErr_TooManyFramesToProcess: OSStatus = -10874
public let kAudioUnitErr_InvalidFile: OSStatus = -10871
public let kAudioUnitErr_FormatNotSupported: OSStatus = -10868
public let kAudioUnitErr_Uninitialized: OSStatus = -10867
public let kAudioUnitErr_InvalidScope: OSStatus = -10866
public let kAudioUnitErr_PropertyNotWritable: OSStatus = -10865
public let kAudioUnitErr_CannotDoInCurrentContext: OSStatus = -10863
public let kAudioUnitErr_InvalidPropertyValue: OSStatus = -10851
public let kAudioUnitErr_PropertyNotInUse: OSStatus = -10850
public let kAudioUnitErr_Initialized: OSStatus = -10849
public let kAudioUnitErr_InvalidOfflineRender: OSStatus = -10848
public let kAudioUnitErr_Unauthorized: OSStatus = -10847
public let kAudioUnitErr_InvalidParameterValue: OSStatus = -66743
public let kAudioComponentErr_InstanceInvalidated: OSStatus = -66749
public let kAudioComponentErr_UnsupportedType: OSStatus = -66751
public let kAudioOutputUnitErr_InvalidDevice: OSStatus = -10851

import AudioTestSupport
import AudioToolbox
import Foundation
import XCTest

/// AUDistortion rendered by the test (a sine from a render callback, 44.1 kHz stereo): each
/// stage measured on its own, the others mixed out.
final class DistortionUnitTests: XCTestCase {
    typealias Offline = AudioUnitOfflineTests

    private var unit: AudioUnit!
    private let source = Offline.Source()

    override func setUpWithError() throws {
        unit = try Offline.make(kAudioUnitSubType_Distortion, kAudioUnitType_Effect)
        Offline.feed(unit, source)
    }

    override func tearDownWithError() throws {
        AudioComponentInstanceDispose(unit)
    }

    private func set(_ id: AudioUnitParameterID, _ value: Float) {
        XCTAssertEqual(AudioUnitSetParameter(unit, id, kAudioUnitScope_Global, 0, value, 0), noErr)
    }

    /// Every stage mixed out but `stage`'s mix (set to 100 %), the soft clip at 0 dB, all wet.
    private func only(_ stage: AudioUnitParameterID?) {
        for mix in [kDistortionParam_DelayMix, kDistortionParam_DecimationMix, kDistortionParam_PolynomialMix, kDistortionParam_RingModMix] {
            set(mix, mix == stage ? 100 : 0)
        }
        set(kDistortionParam_SoftClipGain, 0)
        set(kDistortionParam_FinalMix, 100)
    }

    func testApplesParametersRangesAndDefaults() throws {
        var size = UInt32(0)
        var writable = DarwinBoolean(false)
        XCTAssertEqual(AudioUnitGetPropertyInfo(unit, kAudioUnitProperty_ParameterList, kAudioUnitScope_Global, 0, &size, &writable), noErr)
        XCTAssertEqual(size, 16 * 4)
        let defaults: [(AudioUnitParameterID, Float)] = [
            (kDistortionParam_Delay, 0.1), (kDistortionParam_Decay, 1), (kDistortionParam_DelayMix, 50), (kDistortionParam_Decimation, 50),
            (kDistortionParam_Rounding, 0), (kDistortionParam_DecimationMix, 50), (kDistortionParam_LinearTerm, 1), (kDistortionParam_SquaredTerm, 0),
            (kDistortionParam_CubicTerm, 0), (kDistortionParam_PolynomialMix, 50), (kDistortionParam_RingModFreq1, 100),
            (kDistortionParam_RingModFreq2, 100), (kDistortionParam_RingModBalance, 50), (kDistortionParam_RingModMix, 0),
            (kDistortionParam_SoftClipGain, -6), (kDistortionParam_FinalMix, 50),
        ]
        for (id, expected) in defaults {
            var v: Float = .nan
            XCTAssertEqual(AudioUnitGetParameter(unit, id, kAudioUnitScope_Global, 0, &v), noErr)
            XCTAssertEqual(v, expected, "parameter \(id)")
        }
        set(kDistortionParam_Delay, 1000)
        var v: Float = 0
        AudioUnitGetParameter(unit, kDistortionParam_Delay, kAudioUnitScope_Global, 0, &v)
        XCTAssertEqual(v, 500, "clamped to 500 ms")
    }

    func testFinalMixZeroGivesTheInput() throws {
        // Every stage at work, none of it heard.
        set(kDistortionParam_CubicTerm, 20)
        set(kDistortionParam_RingModMix, 100)
        set(kDistortionParam_Rounding, 100)
        set(kDistortionParam_SoftClipGain, 20)
        set(kDistortionParam_FinalMix, 0)
        XCTAssertEqual(AudioUnitInitialize(unit), noErr)
        let out = Offline.render(unit, frames: 4410)
        let expected = (0..<4410).map { i in Float(0.25) * Float(sin(Double(i) * 2 * Double.pi * 1000 / 44100)) }
        XCTAssertLessThanOrEqual(Offline.maxDifference(out[0], expected), 1e-6)
        XCTAssertLessThanOrEqual(Offline.maxDifference(out[1], expected), 1e-6)
    }

    func testTheSquaredAndCubicTermsAddHarmonics() throws {
        only(kDistortionParam_PolynomialMix)
        XCTAssertEqual(AudioUnitInitialize(unit), noErr)
        func harmonics() -> (second: Double, third: Double) {
            let x = Offline.render(unit, frames: 88200)[0][44100...]
            return (SignalAnalysis.toneDB(x, frequency: 2000, sampleRate: 44100), SignalAnalysis.toneDB(x, frequency: 3000, sampleRate: 44100))
        }
        let clean = harmonics()
        set(kDistortionParam_CubicTerm, 10)
        let cubed = harmonics()
        XCTAssertGreaterThan(cubed.third, clean.third + 20, "x³ makes a third harmonic (\(clean.third) → \(cubed.third) dB)")
        XCTAssertGreaterThan(cubed.third, -35)
        XCTAssertLessThan(cubed.second, -80, "and no second")
        set(kDistortionParam_CubicTerm, 0)
        set(kDistortionParam_SquaredTerm, 10)
        let squared = harmonics()
        XCTAssertLessThan(clean.second, -80)
        XCTAssertGreaterThan(squared.second, -20, "x² makes a second harmonic")
    }

    func testRingModulationMovesTheToneBothWays() throws {
        only(kDistortionParam_RingModMix)
        set(kDistortionParam_RingModFreq1, 300)
        set(kDistortionParam_RingModFreq2, 300)
        XCTAssertEqual(AudioUnitInitialize(unit), noErr)
        let x = Offline.render(unit, frames: 88200)[0][44100...]
        let half = 20 * log10(0.125 / 2.squareRoot())
        XCTAssertEqual(SignalAnalysis.toneDB(x, frequency: 700, sampleRate: 44100), half, accuracy: 0.5, "f − fr at half the amplitude")
        XCTAssertEqual(SignalAnalysis.toneDB(x, frequency: 1300, sampleRate: 44100), half, accuracy: 0.5, "f + fr at half the amplitude")
        XCTAssertLessThan(SignalAnalysis.toneDB(x, frequency: 1000, sampleRate: 44100), -80, "nothing left at f")
    }

    func testTheDelaysEchoesFallByOneOverOnePlusDecay() throws {
        source.impulse = true
        only(kDistortionParam_DelayMix)
        set(kDistortionParam_Delay, 10)
        set(kDistortionParam_Decay, 1)
        // A quiet soft clip is nearly linear: tanh(0.1 x) ≈ 0.1 x.
        set(kDistortionParam_SoftClipGain, -20)
        XCTAssertEqual(AudioUnitInitialize(unit), noErr)
        let out = Offline.render(unit, frames: 2048)[0]
        XCTAssertLessThan(abs(out[0]), 1e-7, "all wet: no dry impulse")
        XCTAssertEqual(Double(out[441]), tanh(0.1), accuracy: 1e-4, "the first echo 10 ms late")
        XCTAssertEqual(Double(out[882] / out[441]), 0.5, accuracy: 0.01, "each echo half the last at decay 1")
        XCTAssertLessThan(out[..<440].map(abs).max()!, 1e-7, "nothing before it")
    }

    func testRoundingAndDecimationCoarsenTheWave() throws {
        only(kDistortionParam_DecimationMix)
        set(kDistortionParam_Decimation, 0)
        set(kDistortionParam_Rounding, 100)
        XCTAssertEqual(AudioUnitInitialize(unit), noErr)
        let rounded = Offline.render(unit, frames: 4410)[0]
        XCTAssertLessThanOrEqual(Set(rounded).count, 5, "two bits: −1, −½, 0, ½, 1 through the clipper")
        set(kDistortionParam_Rounding, 0)
        set(kDistortionParam_Decimation, 100)
        let held = Offline.render(unit, frames: 44100)[0]
        let changes = zip(held, held.dropFirst()).count { $0 != $1 }
        XCTAssertEqual(Double(changes), 44100 / 20, accuracy: 44100 / 20 * 0.1, "each sample held 20 frames")
    }

    func testTheSoftClipperKeepsALoudInputWithinFullScale() throws {
        source.amplitude = 4
        set(kDistortionParam_CubicTerm, 20)
        set(kDistortionParam_SoftClipGain, 20)
        set(kDistortionParam_FinalMix, 100)
        XCTAssertEqual(AudioUnitInitialize(unit), noErr)
        let out = Offline.render(unit, frames: 44100)
        for channel in out {
            let peak = channel.map(abs).max()!
            XCTAssertLessThanOrEqual(peak, 1)
            XCTAssertGreaterThan(peak, 0.9, "driven hard")
            XCTAssertTrue(channel.allSatisfy(\.isFinite))
        }
    }
}

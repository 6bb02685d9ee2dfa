internal import CFFmpeg
package import CoreAudioTypes

/// What this library knows about a compressed (or companded) format: FFmpeg's codec for it and the
/// packet shape Apple's descriptions give it.
package struct CodecInfo: Sendable {
    package let formatID: AudioFormatID
    /// Frames in one packet; `0` when packets vary (FLAC, Opus frames of several sizes are still
    /// fixed per stream, so this is the usual size).
    package let framesPerPacket: Int
    /// Bytes of one packet per channel when constant (IMA4: 34, µ-law: 1); `0` when variable.
    package let bytesPerPacketPerChannel: Int
    package let canDecode: Bool
    package let canEncode: Bool
    /// Apple's name, as `AudioFormatGetProperty(kAudioFormatProperty_FormatName)` gives it.
    package let name: String
    let codec: AVCodecID
    let encoderName: String?

    /// True when every packet has the same byte size, so a file needs no packet table.
    package var isConstantBitRate: Bool { bytesPerPacketPerChannel > 0 }
}

/// The formats this library decodes and encodes through FFmpeg, keyed by Apple's format ID.
package enum CodecCatalog {
    package static let all: [CodecInfo] = {
        var list: [CodecInfo] = []
        func add(_ id: AudioFormatID, _ codec: AVCodecID, frames: Int, bytes: Int, encoder: String?, _ name: String) {
            let decodes = avcodec_find_decoder(codec) != nil
            let encodes = encoder.map { avcodec_find_encoder_by_name($0) != nil } ?? false
            guard decodes || encodes else { return }
            list.append(
                CodecInfo(
                    formatID: id, framesPerPacket: frames, bytesPerPacketPerChannel: bytes,
                    canDecode: decodes, canEncode: encodes, name: name, codec: codec, encoderName: encoder))
        }
        add(kAudioFormatMPEG4AAC, AV_CODEC_ID_AAC, frames: 1024, bytes: 0, encoder: "aac", "AAC")
        add(kAudioFormatMPEG4AAC_HE, AV_CODEC_ID_AAC, frames: 2048, bytes: 0, encoder: nil, "AAC HE")
        add(kAudioFormatMPEG4AAC_HE_V2, AV_CODEC_ID_AAC, frames: 2048, bytes: 0, encoder: nil, "AAC HE v2")
        add(kAudioFormatMPEG4AAC_LD, AV_CODEC_ID_AAC, frames: 512, bytes: 0, encoder: nil, "AAC LD")
        add(kAudioFormatMPEG4AAC_ELD, AV_CODEC_ID_AAC, frames: 512, bytes: 0, encoder: nil, "AAC ELD")
        add(kAudioFormatAppleLossless, AV_CODEC_ID_ALAC, frames: 4096, bytes: 0, encoder: "alac", "Apple Lossless")
        add(kAudioFormatFLAC, AV_CODEC_ID_FLAC, frames: 4096, bytes: 0, encoder: "flac", "FLAC")
        add(kAudioFormatAppleIMA4, AV_CODEC_ID_ADPCM_IMA_QT, frames: 64, bytes: 34, encoder: "adpcm_ima_qt", "IMA 4:1")
        add(kAudioFormatULaw, AV_CODEC_ID_PCM_MULAW, frames: 1, bytes: 1, encoder: "pcm_mulaw", "µLaw 2:1")
        add(kAudioFormatALaw, AV_CODEC_ID_PCM_ALAW, frames: 1, bytes: 1, encoder: "pcm_alaw", "aLaw 2:1")
        add(kAudioFormatMPEGLayer3, AV_CODEC_ID_MP3, frames: 1152, bytes: 0, encoder: "libmp3lame", "MPEG Layer 3")
        add(kAudioFormatMPEGLayer2, AV_CODEC_ID_MP2, frames: 1152, bytes: 0, encoder: nil, "MPEG Layer 2")
        add(kAudioFormatMPEGLayer1, AV_CODEC_ID_MP1, frames: 384, bytes: 0, encoder: nil, "MPEG Layer 1")
        add(kAudioFormatOpus, AV_CODEC_ID_OPUS, frames: 960, bytes: 0, encoder: "libopus", "Opus")
        add(kAudioFormatAC3, AV_CODEC_ID_AC3, frames: 1536, bytes: 0, encoder: nil, "AC-3")
        add(kAudioFormatEnhancedAC3, AV_CODEC_ID_EAC3, frames: 1536, bytes: 0, encoder: nil, "Enhanced AC-3")
        add(kAudioFormatAMR, AV_CODEC_ID_AMR_NB, frames: 160, bytes: 0, encoder: nil, "AMR Narrow Band")
        add(kAudioFormatAMR_WB, AV_CODEC_ID_AMR_WB, frames: 320, bytes: 0, encoder: nil, "AMR Wide Band")
        add(kAudioFormatiLBC, AV_CODEC_ID_ILBC, frames: 240, bytes: 0, encoder: nil, "iLBC")
        add(kAudioFormatMACE3, AV_CODEC_ID_MACE3, frames: 6, bytes: 2, encoder: nil, "MACE 3:1")
        add(kAudioFormatMACE6, AV_CODEC_ID_MACE6, frames: 6, bytes: 1, encoder: nil, "MACE 6:1")
        add(kAudioFormatQDesign2, AV_CODEC_ID_QDM2, frames: 0, bytes: 0, encoder: nil, "QDesign Music 2")
        add(kAudioFormatMicrosoftGSM, AV_CODEC_ID_GSM_MS, frames: 320, bytes: 65, encoder: nil, "Microsoft GSM")
        return list
    }()

    package static func info(_ formatID: AudioFormatID) -> CodecInfo? {
        all.first { $0.formatID == formatID }
    }

    /// The format ID for an FFmpeg codec found in a container, `nil` when Apple has no ID for it.
    static func formatID(for codec: AVCodecID, profile: Int32) -> AudioFormatID? {
        switch codec {
        case AV_CODEC_ID_AAC:
            switch profile {
            case FF_PROFILE_AAC_HE: return kAudioFormatMPEG4AAC_HE
            case FF_PROFILE_AAC_HE_V2: return kAudioFormatMPEG4AAC_HE_V2
            case FF_PROFILE_AAC_LD: return kAudioFormatMPEG4AAC_LD
            case FF_PROFILE_AAC_ELD: return kAudioFormatMPEG4AAC_ELD
            default: return kAudioFormatMPEG4AAC
            }
        case AV_CODEC_ID_MP3: return kAudioFormatMPEGLayer3
        default:
            return all.first { $0.codec == codec }?.formatID
        }
    }

    /// Formats FFmpeg can decode, by Apple ID.
    package static var decodable: [AudioFormatID] { all.filter(\.canDecode).map(\.formatID) }
    /// Formats FFmpeg can encode here, by Apple ID.
    package static var encodable: [AudioFormatID] { all.filter(\.canEncode).map(\.formatID) }
}

/// An error from FFmpeg or from this module, with a message saying what was wrong.
package struct CodecError: Error, CustomStringConvertible {
    package enum Kind: Sendable { case unsupported, invalidData, io, other }
    package let kind: Kind
    package let message: String

    init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    /// `what` failed with FFmpeg error `code`.
    init(_ what: String, code: Int32) {
        var text = [CChar](repeating: 0, count: 128)
        av_strerror(code, &text, text.count)
        let reason = String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let kind: Kind = code == oav_averror_invaliddata() ? .invalidData : (code == -Int32(EIO) || code == -Int32(ENOENT) ? .io : .other)
        self.init(kind, "\(what): \(reason)")
    }

    package var description: String { message }
}

/// FFmpeg logs to stderr by default; a library must not. Errors reach callers as `CodecError`.
let quietFFmpeg: Void = { av_log_set_level(AV_LOG_QUIET) }()

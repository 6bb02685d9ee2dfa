package import CoreAudioTypes

/// Apple's magic cookies and FFmpeg's `extradata` say the same thing in different wrappers:
/// AAC's cookie is an MPEG-4 ES descriptor around the AudioSpecificConfig FFmpeg wants; ALAC's is
/// the 24-byte ALACSpecificConfig, which FFmpeg wants inside an `alac` atom. Other formats use the
/// bytes as they are.
package enum MagicCookie {
    /// FFmpeg `extradata` for Apple's cookie of `formatID`.
    package static func extradata(fromCookie cookie: [UInt8], formatID: AudioFormatID) -> [UInt8] {
        switch formatID {
        case kAudioFormatMPEG4AAC, kAudioFormatMPEG4AAC_HE, kAudioFormatMPEG4AAC_HE_V2,
            kAudioFormatMPEG4AAC_LD, kAudioFormatMPEG4AAC_ELD:
            return audioSpecificConfig(inESDS: cookie) ?? cookie
        case kAudioFormatAppleLossless:
            guard let config = alacConfig(in: cookie) else { return cookie }
            return [0, 0, 0, 36] + Array("alac".utf8) + [0, 0, 0, 0] + config
        default:
            return cookie
        }
    }

    /// Apple's cookie for FFmpeg's `extradata` of `formatID`.
    package static func cookie(fromExtradata extradata: [UInt8], formatID: AudioFormatID, bitRate: Int = 0) -> [UInt8] {
        guard !extradata.isEmpty else { return [] }
        switch formatID {
        case kAudioFormatMPEG4AAC, kAudioFormatMPEG4AAC_HE, kAudioFormatMPEG4AAC_HE_V2,
            kAudioFormatMPEG4AAC_LD, kAudioFormatMPEG4AAC_ELD:
            return esds(audioSpecificConfig: extradata, bitRate: bitRate)
        case kAudioFormatAppleLossless:
            return alacConfig(in: extradata) ?? extradata
        default:
            return extradata
        }
    }

    // MARK: MPEG-4 descriptors (ISO/IEC 14496-1 §7.2.6)

    /// An ES_Descriptor holding a DecoderConfigDescriptor (AAC audio) with `asc` as its
    /// DecoderSpecificInfo, and an SLConfigDescriptor: the cookie Apple's AAC files carry.
    static func esds(audioSpecificConfig asc: [UInt8], bitRate: Int) -> [UInt8] {
        func descriptor(_ tag: UInt8, _ body: [UInt8]) -> [UInt8] {
            let n = body.count
            return [tag, 0x80 | UInt8((n >> 21) & 0x7F), 0x80 | UInt8((n >> 14) & 0x7F), 0x80 | UInt8((n >> 7) & 0x7F), UInt8(n & 0x7F)] + body
        }
        func be32(_ v: Int) -> [UInt8] { [UInt8((v >> 24) & 0xFF), UInt8((v >> 16) & 0xFF), UInt8((v >> 8) & 0xFF), UInt8(v & 0xFF)] }
        let decoderSpecific = descriptor(0x05, asc)
        let decoderConfig = descriptor(0x04, [0x40, 0x15, 0, 0, 0] + be32(bitRate) + be32(bitRate) + decoderSpecific)
        let slConfig = descriptor(0x06, [0x02])
        return descriptor(0x03, [0, 0, 0] + decoderConfig + slConfig)
    }

    /// The DecoderSpecificInfo inside an ES descriptor (optionally inside an `esds` atom), or
    /// `nil` when `bytes` is not one.
    static func audioSpecificConfig(inESDS bytes: [UInt8]) -> [UInt8]? {
        var start = 0
        if bytes.count >= 12, Array(bytes[4..<8]) == Array("esds".utf8) { start = 12 }
        guard start < bytes.count, bytes[start] == 0x03 else { return nil }
        var i = start
        // Walks descriptors: ES (0x03) and DecoderConfig (0x04) contain children.
        while i < bytes.count {
            let tag = bytes[i]
            i += 1
            var length = 0
            for _ in 0..<4 {
                guard i < bytes.count else { return nil }
                let b = bytes[i]
                i += 1
                length = (length << 7) | Int(b & 0x7F)
                if b & 0x80 == 0 { break }
            }
            switch tag {
            case 0x03:
                guard i + 3 <= bytes.count else { return nil }
                let flags = bytes[i + 2]
                i += 3
                if flags & 0x80 != 0 { i += 2 }
                if flags & 0x40 != 0 {
                    guard i < bytes.count else { return nil }
                    i += 1 + Int(bytes[i])
                }
                if flags & 0x20 != 0 { i += 2 }
            case 0x04:
                i += 13
            case 0x05:
                guard length > 0, i + length <= bytes.count else { return nil }
                return Array(bytes[i..<(i + length)])
            default:
                i += length
            }
        }
        return nil
    }

    // MARK: ALAC

    /// The 24-byte ALACSpecificConfig in an ALAC cookie, bare or after `frma`/`alac` atom headers.
    static func alacConfig(in bytes: [UInt8]) -> [UInt8]? {
        var i = 0
        while i + 8 <= bytes.count {
            let tag = Array(bytes[(i + 4)..<(i + 8)])
            if tag == Array("frma".utf8) {
                i += 12
            } else if tag == Array("alac".utf8) {
                i += 12
            } else {
                break
            }
        }
        guard i + 24 <= bytes.count else { return nil }
        return Array(bytes[i..<(i + 24)])
    }
}

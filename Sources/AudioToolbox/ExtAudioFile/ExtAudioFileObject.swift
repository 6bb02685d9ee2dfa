import CoreAudioTypes

/// An ExtAudioFile: an AudioFile plus a converter between its format and the client's.
/// Positions are in the file's sample frames, as Apple's (QA1609); priming and remainder frames
/// of compressed files are trimmed, so reads return exactly the valid frames.
final class ExtAudioFileObject: ReferencedObject, @unchecked Sendable {
    let file: AudioFileObject
    let fileID: AudioFileID
    let ownsFile: Bool
    let forWriting: Bool
    private(set) var fileFormat: AudioStreamBasicDescription
    private(set) var clientFormat: AudioStreamBasicDescription
    private(set) var converter: AudioConverterObject?
    private var core: ConverterCore? { converter?.core }
    /// `kExtAudioFileProperty_ClientChannelLayout` as set (`AudioChannelLayout` bytes).
    private(set) var clientChannelLayout: [UInt8]?

    // Reading state.
    private var nextPacket: Int64 = 0
    private var seekFrame: Int64 = 0
    private var producedClientFrames: Int64 = 0
    private var discardClientFrames = 0
    private let packetBuffer = RawBuffer()
    private var descriptions: [AudioStreamPacketDescription] = []
    private var descriptionBuffer: [AudioStreamPacketDescription] = []
    private let trash = RawBuffer()

    // Writing state: the next packet written, and in client frames where the next write goes
    // and how far the file reaches (more than the position after a seek back).
    private var writtenPackets: Int64 = 0
    private var writtenClientFrames: Int64 = 0
    private var writtenLengthClientFrames: Int64 = 0
    private var cookieWritten = false

    /// The ``ExtAudioFileRef`` handed to the user, never reused (``newObjectReference(_:)``).
    let ref: ExtAudioFileRef = newObjectReference(.extAudioFile)

    init(file: AudioFileObject, ownsFile: Bool, forWriting: Bool) throws(AudioFailure) {
        self.file = file
        fileID = file.id
        self.ownsFile = ownsFile
        self.forWriting = forWriting
        var format = AudioStreamBasicDescription()
        _ = file.with { c throws(AudioFailure) in format = c.format }
        fileFormat = format
        clientFormat = format
        if format.mFormatID == kAudioFormatLinearPCM { try setClientFormat(format) }
        if forWriting { _ = file.with { c throws(AudioFailure) in writtenPackets = c.packetCount } }
    }

    private var packetTable: AudioFilePacketTableInfo? {
        var info: AudioFilePacketTableInfo?
        _ = file.with { c throws(AudioFailure) in info = c.packetTableInfo }
        return info
    }

    private var packetCount: Int64 {
        var n: Int64 = 0
        _ = file.with { c throws(AudioFailure) in n = c.packetCount }
        return n
    }

    /// Valid frames in the file (file rate): the packet table's count, or packets × frames per packet.
    var fileLengthFrames: Int64 {
        if forWriting { return fileFrames(writtenLengthClientFrames) }
        if let t = packetTable, fileFormat.mFormatID != kAudioFormatLinearPCM { return t.mNumberValidFrames }
        if fileFormat.mFramesPerPacket > 0 { return packetCount.saturatingMultiplied(by: Int64(fileFormat.mFramesPerPacket)) }
        var total: Int64 = 0
        _ = file.with { c throws(AudioFailure) in
            for i in 0..<c.packetCount { total += Int64(c.packetSize(i)?.frames ?? 0) }
        }
        return total
    }

    /// Client frames written, in the file's frames.
    private func fileFrames(_ client: Int64) -> Int64 {
        fileFormat.mSampleRate == clientFormat.mSampleRate
            ? client : Int64(saturating: (Double(client) * fileFormat.mSampleRate / clientFormat.mSampleRate).rounded())
    }

    private var priming: Int64 {
        fileFormat.mFormatID == kAudioFormatLinearPCM ? 0 : Int64(packetTable?.mPrimingFrames ?? 0)
    }

    private var ratio: Double { clientFormat.mSampleRate / fileFormat.mSampleRate }

    func setClientFormat(_ format: AudioStreamBasicDescription) throws(AudioFailure) {
        guard format.mFormatID == kAudioFormatLinearPCM else {
            throw AudioFailure(kExtAudioFileError_NonPCMClientFormat, "the client format must be linear PCM")
        }
        if forWriting && writtenLengthClientFrames > 0 {
            throw AudioFailure(kExtAudioFileError_InvalidOperationOrder, "the client format cannot change after writing started")
        }
        let core =
            forWriting
            ? try ConverterCore(from: format, to: fileFormat)
            : try ConverterCore(from: fileFormat, to: format)
        if !forWriting {
            var cookie: [UInt8] = []
            _ = file.with { c throws(AudioFailure) in cookie = c.magicCookie }
            core.decompressionCookie = cookie
        }
        clientFormat = core.sourceIsPCM && forWriting ? core.source : (forWriting ? format : core.destination)
        if let old = converter { _ = liveConverters.remove(old.ref) }
        let object = AudioConverterObject(core)
        liveConverters.add(object)
        converter = object
        // A layout for another channel count no longer describes the client's channels.
        if let layout = clientChannelLayout {
            do { core.setChannelOrder(try channelOrder(for: layout)) } catch { clientChannelLayout = nil }
        }
        if !forWriting { try seek(to: currentFrame) }
    }

    /// The file's channel layout: the one it holds, else mono or stereo by its channel count.
    var fileChannelLayout: [UInt8]? {
        var layout: [UInt8]?
        _ = file.with { c throws(AudioFailure) in layout = c.channelLayout }
        if let layout { return layout }
        guard fileFormat.mChannelsPerFrame <= 2 else { return nil }
        var value = AudioChannelLayout()
        value.mChannelLayoutTag = fileFormat.mChannelsPerFrame == 1 ? kAudioChannelLayoutTag_Mono : kAudioChannelLayoutTag_Stereo
        return bytes(value)
    }

    /// Sets the client's channel layout: the client's channels are the file's, reordered to the
    /// layout's labels. Its channel count must be the client format's, and each of its labels one
    /// of the file's (a permutation), or, where the counts differ, both mono or stereo (the
    /// converter's channel mapping then applies): else `kExtAudioFileError_InvalidChannelMap`
    /// (`kAudioFormatUnknownFormatError` for a tag this library cannot resolve). A file being
    /// written takes it before the first write (`kExtAudioFileError_InvalidOperationOrder`).
    func setClientChannelLayout(_ layout: [UInt8]) throws(AudioFailure) {
        if forWriting && writtenLengthClientFrames > 0 {
            throw AudioFailure(kExtAudioFileError_InvalidOperationOrder, "the client channel layout cannot change after writing started")
        }
        let order = try channelOrder(for: layout)
        guard let core else {
            throw AudioFailure(kExtAudioFileError_InvalidOperationOrder, "set a client format before its channel layout")
        }
        core.setChannelOrder(order)
        clientChannelLayout = layout
        if !forWriting { try seek(to: currentFrame) }
    }

    /// The converter's channel order for a client layout (see ``setClientChannelLayout(_:)``).
    private func channelOrder(for layout: [UInt8]) throws(AudioFailure) -> [Int]? {
        func labels(_ bytes: [UInt8]) throws(AudioFailure) -> [AudioChannelLabel] {
            do {
                return try ChannelLayoutLabels.labels(bytes)
            } catch {
                throw error == .tooShort
                    ? AudioFailure(kExtAudioFileError_InvalidPropertySize, "the channel layout is shorter than its fields say")
                    : AudioFailure(kAudioFormatUnknownFormatError, "the channel layout's tag is not one this library knows")
            }
        }
        let client = try labels(layout)
        guard client.count == Int(clientFormat.mChannelsPerFrame) else {
            throw AudioFailure(kExtAudioFileError_InvalidChannelMap, "the layout has \(client.count) channels; the client format \(clientFormat.mChannelsPerFrame)")
        }
        guard let fileLayout = fileChannelLayout else {
            throw AudioFailure(kExtAudioFileError_InvalidChannelMap, "the file has no channel layout to map from")
        }
        let fileLabels = try labels(fileLayout)
        func plain(_ l: [AudioChannelLabel]) -> Bool {
            l == [kAudioChannelLabel_Mono] || l == [kAudioChannelLabel_Center] || l == [kAudioChannelLabel_Left, kAudioChannelLabel_Right]
        }
        guard client.count == fileLabels.count else {
            guard plain(client), plain(fileLabels) else {
                throw AudioFailure(kExtAudioFileError_InvalidChannelMap, "only mono and stereo layouts are mixed between channel counts")
            }
            return nil
        }
        // Client channel i is file channel from[i] (reading); file channel j is client channel to[j] (writing).
        var taken = Set<Int>()
        var from: [Int] = []
        for label in client {
            guard let i = fileLabels.indices.first(where: { fileLabels[$0] == label && !taken.contains($0) }) else {
                throw AudioFailure(kExtAudioFileError_InvalidChannelMap, "the file has no channel labelled \(label) for the client layout")
            }
            taken.insert(i)
            from.append(i)
        }
        guard forWriting else { return from }
        var to = [Int](repeating: 0, count: from.count)
        for (clientIndex, fileIndex) in from.enumerated() { to[fileIndex] = clientIndex }
        return to
    }

    var currentFrame: Int64 {
        if forWriting { return fileFrames(writtenClientFrames) }
        return seekFrame + Int64(saturating: (Double(producedClientFrames) / ratio).rounded())
    }

    // MARK: Reading

    func seek(to frame: Int64) throws(AudioFailure) {
        if forWriting {
            try seekWriting(to: frame)
            return
        }
        guard frame >= 0, frame <= fileLengthFrames else {
            throw AudioFailure(kExtAudioFileError_InvalidSeek, "frame \(frame) is outside the file (0 … \(fileLengthFrames))")
        }
        guard let core else { throw AudioFailure(kExtAudioFileError_NonPCMClientFormat, "set a linear PCM client format first") }
        core.reset()
        let target = frame + priming
        let fpp = Int64(fileFormat.mFramesPerPacket)
        if fpp > 0 {
            // One packet of pre-roll: codecs with overlapping transforms need the previous packet.
            let packet = target / fpp
            let preroll: Int64 = fileFormat.mFormatID == kAudioFormatLinearPCM || packet == 0 ? 0 : 1
            nextPacket = packet - preroll
            discardClientFrames = Int(saturating: (Double(target - nextPacket * fpp) * ratio).rounded())
        } else {
            var start: Int64 = 0
            var index: Int64 = 0
            _ = file.with { c throws(AudioFailure) in
                while index < c.packetCount, let p = c.packetSize(index), start + Int64(p.frames) <= target {
                    start += Int64(p.frames)
                    index += 1
                }
            }
            nextPacket = index
            discardClientFrames = Int(saturating: (Double(target - start) * ratio).rounded())
        }
        seekFrame = frame
        producedClientFrames = 0
    }

    /// Reads up to `count` client frames into `list`; returns frames read (0 at the end).
    func read(_ count: Int, into list: UnsafeMutableAudioBufferListPointer) throws(AudioFailure) -> Int {
        guard let core, let client = core.destinationPCM else {
            throw AudioFailure(kExtAudioFileError_NonPCMClientFormat, "set a linear PCM client format before reading")
        }
        let capacity = min(count, client.frames(in: list))
        let totalClient = Int64(saturating: (Double(fileLengthFrames) * ratio).rounded())
        let startClient = Int64(saturating: (Double(seekFrame) * ratio).rounded())
        let remaining = max(totalClient - startClient - producedClientFrames, 0)
        let want = Int(min(Int64(capacity), remaining))
        guard want > 0 else { return 0 }
        while core.availableFrames < want + discardClientFrames && !core.inputEnded {
            try feed(core)
        }
        if discardClientFrames > 0 {
            let drop = min(discardClientFrames, core.availableFrames)
            discard(drop, core)
            discardClientFrames -= drop
        }
        let n = core.takeFrames(want, into: list)
        for i in 0..<client.bufferCount { list[i].mDataByteSize = UInt32(n * client.bytesPerFrame) }
        producedClientFrames += Int64(n)
        return n
    }

    private func discard(_ frames: Int, _ core: ConverterCore) {
        guard let client = core.destinationPCM, frames > 0 else { return }
        let buffers = client.bufferCount
        let size = frames * client.bytesPerFrame
        trash.reserve(size * buffers)
        let list = AudioBufferList.allocate(maximumBuffers: buffers)
        defer { list.unsafeMutablePointer.deallocate() }
        for i in 0..<buffers {
            list[i] = AudioBuffer(
                mNumberChannels: client.nonInterleaved ? 1 : clientFormat.mChannelsPerFrame, mDataByteSize: UInt32(size),
                mData: trash.pointer + i * size)
        }
        _ = core.takeFrames(frames, into: list)
    }

    /// Reads a run of packets from the file into the converter, or ends its input. Constant-size
    /// packets (PCM, IMA4, µ-law) go to the converter as one run; variable ones one by one.
    private func feed(_ core: ConverterCore) throws(AudioFailure) {
        let fixed = Int(fileFormat.mBytesPerPacket)
        let pcm = fileFormat.mFormatID == kAudioFormatLinearPCM
        let wanted = fixed > 0 ? max(16384 / max(Int(fileFormat.mFramesPerPacket), 1), 1) : 8
        var got = 0
        var bytes = 0
        let from = nextPacket
        let status = file.with { c throws(AudioFailure) in
            got = Int(max(min(Int64(wanted), c.packetCount - from), 0))
            guard got > 0 else { return }
            if fixed > 0 {
                packetBuffer.reserve(got * fixed)
            } else {
                var size = 0
                if descriptions.count < got { descriptions = [AudioStreamPacketDescription](repeating: .init(), count: got) }
                for i in 0..<got {
                    let s = c.packetSize(from + Int64(i))?.bytes ?? 0
                    descriptions[i] = AudioStreamPacketDescription(mStartOffset: Int64(size), mVariableFramesInPacket: 0, mDataByteSize: UInt32(s))
                    size += s
                }
                packetBuffer.reserve(size)
            }
            bytes = try c.readPacketBytes(start: from, count: got, into: packetBuffer.pointer)
        }
        guard status == noErr else { throw AudioFailure(status, file.lastReason) }
        if got == 0 {
            try core.endInput()
            return
        }
        nextPacket += Int64(got)
        if pcm {
            var list = AudioBufferList(
                mNumberBuffers: 1,
                mBuffers: AudioBuffer(mNumberChannels: fileFormat.mChannelsPerFrame, mDataByteSize: UInt32(bytes), mData: packetBuffer.pointer))
            try core.pushPCM(UnsafeMutableAudioBufferListPointer(&list), frames: bytes / Int(fileFormat.mBytesPerFrame))
        } else if fixed > 0 {
            // FFmpeg's decoders for constant-size formats take many packets at once.
            try core.pushPacket(UnsafeRawBufferPointer(start: packetBuffer.pointer, count: bytes))
        } else {
            for i in 0..<got {
                let d = descriptions[i]
                try core.pushPacket(UnsafeRawBufferPointer(start: packetBuffer.pointer + Int(d.mStartOffset), count: Int(d.mDataByteSize)))
            }
        }
    }

    // MARK: Writing

    /// Moves where the next write goes, within what is written: later writes overwrite from
    /// there. Only where file frames are the client's one for one and nothing is held between
    /// them: a linear PCM file at the client's sample rate. A compressed file's packets depend on
    /// what came before them, and a sample rate converter holds history, so those are
    /// `kExtAudioFileError_InvalidSeek`.
    private func seekWriting(to frame: Int64) throws(AudioFailure) {
        guard fileFormat.mFormatID == kAudioFormatLinearPCM, fileFormat.mSampleRate == clientFormat.mSampleRate else {
            throw AudioFailure(kExtAudioFileError_InvalidSeek, "a file being written can only seek when it is linear PCM at the client's rate")
        }
        guard frame >= 0, frame <= fileLengthFrames else {
            throw AudioFailure(kExtAudioFileError_InvalidSeek, "frame \(frame) is outside what is written (0 … \(fileLengthFrames))")
        }
        if let core { try drain(core) }
        writtenPackets = frame
        writtenClientFrames = frame
    }

    func write(_ count: Int, from list: UnsafeMutableAudioBufferListPointer) throws(AudioFailure) {
        guard forWriting else { throw AudioFailure(kAudioFilePermissionsError, "the file is open for reading") }
        guard let core, let client = core.sourcePCM else {
            throw AudioFailure(kExtAudioFileError_NonPCMClientFormat, "set a linear PCM client format before writing")
        }
        guard count > 0 else { return }
        guard client.frames(in: list) >= count else {
            throw AudioFailure(kAudio_ParamError, "the buffer list holds fewer than \(count) frames")
        }
        try prepareCompressedFile(core)
        if core.passthrough, core.availableFrames == 0, let data = list[0].mData {
            // The client's bytes are the file's: straight to the file, without the converter's copies.
            let start = writtenPackets
            let status = file.with { c throws(AudioFailure) in
                try c.writePackets(
                    start: start, count: count, bytes: UnsafeRawBufferPointer(start: data, count: count * client.bytesPerFrame), descriptions: nil)
            }
            writtenPackets += Int64(count)
            advanceWritten(count)
            guard status == noErr else { throw AudioFailure(status, file.lastReason) }
            return
        }
        try core.pushPCM(list, frames: count)
        advanceWritten(count)
        try drain(core)
    }

    private func advanceWritten(_ count: Int) {
        writtenClientFrames += Int64(count)
        writtenLengthClientFrames = max(writtenLengthClientFrames, writtenClientFrames)
    }

    /// Before the first packet: the cookie and the priming the container must record up front.
    private func prepareCompressedFile(_ core: ConverterCore) throws(AudioFailure) {
        guard !cookieWritten, !core.destinationIsPCM else { return }
        cookieWritten = true
        let cookie = core.compressionCookie
        let priming = core.primingFrames
        let status = file.with { c throws(AudioFailure) in
            if !cookie.isEmpty { try c.setMagicCookie(cookie) }
            if fileFormat.mFormatID != kAudioFormatLinearPCM, c.fileType != kAudioFileWAVEType, c.fileType != kAudioFileAIFCType {
                try? c.setPacketTableInfo(AudioFilePacketTableInfo(mNumberValidFrames: 0, mPrimingFrames: Int32(clamping: priming), mRemainderFrames: 0))
            }
        }
        guard status == noErr else { throw AudioFailure(status, file.lastReason) }
    }

    private func drain(_ core: ConverterCore) throws(AudioFailure) {
        var status = noErr
        if let dst = core.destinationPCM {
            let frames = core.availableFrames
            guard frames > 0 else { return }
            let size = frames * dst.bytesPerFrame
            packetBuffer.reserve(size)
            var list = AudioBufferList(
                mNumberBuffers: 1,
                mBuffers: AudioBuffer(mNumberChannels: fileFormat.mChannelsPerFrame, mDataByteSize: UInt32(size), mData: packetBuffer.pointer))
            _ = core.takeFrames(frames, into: UnsafeMutableAudioBufferListPointer(&list))
            status = file.with { c throws(AudioFailure) in
                try c.writePackets(
                    start: writtenPackets, count: frames, bytes: UnsafeRawBufferPointer(start: packetBuffer.pointer, count: size), descriptions: nil)
            }
            writtenPackets += Int64(frames)
        } else {
            let count = core.availablePackets
            guard count > 0 else { return }
            let bytes = core.availablePacketBytes
            packetBuffer.reserve(bytes)
            let variable = fileFormat.isVariablePacketSize
            if variable && descriptionBuffer.count < count {
                descriptionBuffer = [AudioStreamPacketDescription](repeating: .init(), count: count)
            }
            let taken = descriptionBuffer.withUnsafeMutableBufferPointer { d in
                // Frames per packet recorded too: the last packet of AAC is shorter, and M4A keeps that.
                core.takePackets(max: count, capacity: bytes, into: packetBuffer.pointer, descriptions: variable ? d.baseAddress : nil, variableFrames: true)
            }
            let start = writtenPackets
            status = descriptionBuffer.withUnsafeBufferPointer { d in
                file.with { c throws(AudioFailure) in
                    try c.writePackets(
                        start: start, count: taken.packets, bytes: UnsafeRawBufferPointer(start: packetBuffer.pointer, count: taken.bytes),
                        descriptions: variable ? d.baseAddress : nil)
                }
            }
            writtenPackets += Int64(taken.packets)
        }
        guard status == noErr else { throw AudioFailure(status, file.lastReason) }
    }

    /// Flushes the converter, records the packet table, closes the file if it is ours.
    func dispose() throws(AudioFailure) {
        defer {
            if let converter { _ = liveConverters.remove(converter.ref) }
        }
        var failure: AudioFailure?
        if forWriting, let core {
            do {
                try prepareCompressedFile(core)
                try core.endInput()
                try drain(core)
                if !core.destinationIsPCM {
                    let valid = fileLengthFrames
                    let priming = Int64(core.primingFrames)
                    let cookie = core.compressionCookie
                    let status = file.with { c throws(AudioFailure) in
                        var total: Int64 = 0
                        for i in 0..<c.packetCount { total += Int64(c.packetSize(i)?.frames ?? 0) }
                        let remainder = max(total - priming - valid, 0)
                        try? c.setPacketTableInfo(
                            AudioFilePacketTableInfo(mNumberValidFrames: valid, mPrimingFrames: Int32(clamping: priming), mRemainderFrames: Int32(clamping: remainder)))
                        if fileFormat.mFormatID == kAudioFormatFLAC { try? c.setMagicCookie(cookie) }
                    }
                    if status != noErr { failure = AudioFailure(status, file.lastReason) }
                }
            } catch {
                failure = error
            }
        }
        if ownsFile {
            let status = AudioFileClose(fileID)
            if status != noErr && failure == nil { failure = AudioFailure(status, AudioFileLastFailureReason()) }
        }
        if let failure { throw failure }
    }
}

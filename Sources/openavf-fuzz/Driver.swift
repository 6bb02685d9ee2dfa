// Fuzzing the file readers.
//
// Built by `swift build` this is a mutating driver: it reads seed files, mutates them (bit
// flips, byte runs, truncation, absurd header values, splices) with a fixed random seed, and
// runs each through the harness. Built by Scripts/fuzz with `--sanitize=fuzzer`, the same
// harness is libFuzzer's coverage-guided target (LLVMFuzzerTestOneInput below) and this file's
// driver is compiled out.
//
// usage: openavf-fuzz <iterations> <seed file or folder>...
import Foundation

#if OPENAVF_LIBFUZZER
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    FuzzHarness.exercise(UnsafeRawBufferPointer(start: data, count: size))
    return 0
}
#else
/// xorshift64*: deterministic, so a failure reproduces from the iteration number.
struct Mutator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state ^= state >> 12
        state ^= state << 25
        state ^= state >> 27
        return state &* 2_685_821_657_736_338_717
    }
    mutating func below(_ n: Int) -> Int { n <= 0 ? 0 : Int(next() % UInt64(n)) }

    mutating func mutate(_ input: [UInt8], others: [[UInt8]]) -> [UInt8] {
        var b = input
        for _ in 0...below(4) {
            guard !b.isEmpty else { return [UInt8(truncatingIfNeeded: next())] }
            switch below(8) {
            case 0:  // flip bits
                let i = below(b.count)
                b[i] ^= UInt8(1 << below(8))
            case 1:  // random byte
                b[below(b.count)] = UInt8(truncatingIfNeeded: next())
            case 2:  // absurd 32-bit value (sizes, counts) anywhere in the first 512 bytes
                let i = below(min(b.count, 512))
                let v: [UInt8] = [[0xFF, 0xFF, 0xFF, 0xFF], [0x7F, 0xFF, 0xFF, 0xFF], [0, 0, 0, 0], [0x80, 0, 0, 0], [0, 0, 0, 1]][below(5)]
                for k in 0..<4 where i + k < b.count { b[i + k] = v[k] }
            case 3:  // truncate
                b.removeLast(below(b.count))
            case 4:  // delete a run
                let i = below(b.count)
                b.removeSubrange(i..<min(b.count, i + 1 + below(64)))
            case 5:  // duplicate a run
                let i = below(b.count)
                let run = b[i..<min(b.count, i + 1 + below(256))]
                b.insert(contentsOf: run, at: below(b.count))
            case 6:  // splice another seed's tail
                let other = others[below(others.count)]
                if !other.isEmpty { b = Array(b.prefix(below(b.count))) + other.suffix(below(other.count)) }
            default:  // interesting small numbers at a random offset
                let i = below(b.count)
                b[i] = [0, 1, 0x7F, 0x80, 0xFF][below(5)]
            }
        }
        return b
    }
}

@main
struct FuzzDriver {
    static func main() {
        let arguments = CommandLine.arguments
        guard arguments.count >= 3, let iterations = Int(arguments[1]) else {
            FileHandle.standardError.write(Data("usage: openavf-fuzz <iterations> <seed file or folder>...\n".utf8))
            exit(2)
        }
        // A folder stands for the files in it (../shared/regressions, a libFuzzer corpus).
        let paths = arguments.dropFirst(2).flatMap { path -> [String] in
            guard let names = try? FileManager.default.contentsOfDirectory(atPath: path) else { return [path] }
            return names.sorted().map { "\(path)/\($0)" }
        }
        let seeds = paths.compactMap { FileManager.default.contents(atPath: $0).map { [UInt8]($0) } }
        guard !seeds.isEmpty else {
            FileHandle.standardError.write(Data("openavf-fuzz: no readable seed files\n".utf8))
            exit(2)
        }
        var mutator = Mutator(state: 0x9E37_79B9_7F4A_7C15)
        let crashCopy = FuzzHarness.path + ".current"
        let started = Date()
        for i in 0..<iterations {
            let input = mutator.mutate(seeds[i % seeds.count], others: seeds)
            // Kept on disk while it runs: if the process dies, this is the input that killed it.
            _ = FileManager.default.createFile(atPath: crashCopy, contents: Data(input))
            input.withUnsafeBytes { FuzzHarness.exercise($0) }
            if (i + 1) % 10_000 == 0 {
                print("openavf-fuzz: \(i + 1) inputs, \(Int(Date().timeIntervalSince(started))) s")
            }
        }
        unlink(crashCopy)
        unlink(FuzzHarness.path)
        print("openavf-fuzz: \(iterations) mutated inputs, no crash, no hang, \(Int(Date().timeIntervalSince(started))) s")
    }
}
#endif

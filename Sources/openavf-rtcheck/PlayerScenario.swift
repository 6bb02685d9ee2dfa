// player: AVAudioPlayer looping once and seeking while it plays.
import AVFAudio

@MainActor let playerScenario = Scenario(name: "player") { _, files, thread in
    // AVAudioPlayer looping once and seeking while it plays.
    let player = try AVAudioPlayer(contentsOf: files.appendingPathComponent("tone.wav"))
    player.numberOfLoops = 1
    guard player.prepareToPlay() else { throw Failure("prepareToPlay failed") }
    return try watching(thread) {
        guard player.play() else { throw Failure("play failed") }
        hold(0.4)
        player.currentTime = 0.1
        try wait("the player to finish", timeout: 5) { !player.isPlaying }
        player.stop()
    }
}

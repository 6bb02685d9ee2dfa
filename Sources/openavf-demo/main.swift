import AudioTestSupport
import Foundation
func log(_ s: String) { FileHandle.standardError.write((s + "\n").data(using: .utf8)!) }
let t0 = Date()
let server = try PrivatePulseServer()
log("server up \(Date().timeIntervalSince(t0)) \(server.serverString)")
log(try server.pactl(["info"]))
do {
let cap = try SignalCapture(server: server, device: "speaker.monitor")
log("capture \(cap.frameCount) \(Date().timeIntervalSince(t0))")
} catch { log("\(error) \(Date().timeIntervalSince(t0))") }
server.stop()

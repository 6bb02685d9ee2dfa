public import Foundation
import AudioHAL

// Apple's System Sound Services (AudioServices.h): short sounds played by the system rather than
// through a stream of the app's own. Here the system is the sound server: a sound is read once,
// decoded to float, uploaded to the server's sample cache, and each play asks the server to play
// it from there, so it starts without this process opening a stream.

public typealias SystemSoundID = UInt32
public typealias AudioServicesPropertyID = UInt32
public typealias AudioServicesSystemSoundCompletionProc = @convention(c) (SystemSoundID, UnsafeMutableRawPointer?) -> Void

public let kAudioServicesNoError: OSStatus = 0
public let kAudioServicesUnsupportedPropertyError = OSStatus(bitPattern: fourCC("pty?"))
public let kAudioServicesBadPropertySizeError = OSStatus(bitPattern: fourCC("!siz"))
public let kAudioServicesBadSpecifierSizeError = OSStatus(bitPattern: fourCC("!spc"))
public let kAudioServicesSystemSoundUnspecifiedError: OSStatus = -1500
public let kAudioServicesSystemSoundClientTimedOutError: OSStatus = -1501
public let kAudioServicesSystemSoundExceededMaximumDurationError: OSStatus = -1502

/// Vibrates an iPhone. Accepted everywhere, as on a Mac: there is nothing to vibrate, so nothing
/// is heard and a completion runs at once.
public let kSystemSoundID_Vibrate: SystemSoundID = 0x0000_0FFF
/// The user's alert sound: the desktop's bell, the server's `bell-window-system` sample where
/// the session loaded one (as X11's bell module does); otherwise nothing is heard.
public let kSystemSoundID_UserPreferredAlert: SystemSoundID = 0x0000_1000
/// Flashes the screen on a Mac: nothing is shown here, and nothing heard.
public let kSystemSoundID_FlashScreen: SystemSoundID = 0x0000_0FFE

/// Whether a sound is a user-interface sound effect (1, the default): such sounds play with the
/// server's `event` role, so that the desktop's alert volume and event-sound settings govern them
/// as macOS's "Play user interface sound effects" does; 0 plays it as an app's own sound effect
/// (the `game` role: it mixes with others and is no alert).
public let kAudioServicesPropertyIsUISound: AudioServicesPropertyID = fourCC("isui")
/// Whether a sound plays to its end when the app dies. The server plays system sounds from its
/// own cache, and finishes each whatever becomes of the app: this reads 1, and setting 0 is
/// refused with `kAudioServicesUnsupportedPropertyError`.
public let kAudioServicesPropertyCompletePlaybackIfAppDies: AudioServicesPropertyID = fourCC("ifdi")

/// Reads the sound file at `inFileURL` (any format `ExtAudioFile` reads, 30 seconds at most) and
/// stores it in the sound server's sample cache. A file that cannot be read returns the file
/// API's error; a longer one `kAudioServicesSystemSoundExceededMaximumDurationError`.
@discardableResult
public func AudioServicesCreateSystemSoundID(_ inFileURL: CFURL, _ outSystemSoundID: UnsafeMutablePointer<SystemSoundID>) -> OSStatus {
    SystemSounds.shared.create(inFileURL, outSystemSoundID)
}

/// Removes the sound from the server's cache. An ID that is not a sound (disposed already)
/// returns `kAudioServicesSystemSoundUnspecifiedError`.
@discardableResult
public func AudioServicesDisposeSystemSoundID(_ inSystemSoundID: SystemSoundID) -> OSStatus {
    SystemSounds.shared.dispose(inSystemSoundID)
}

/// Plays the sound and returns at once; the completion added with
/// ``AudioServicesAddSystemSoundCompletion(_:_:_:_:_:)`` runs when it ends.
public func AudioServicesPlaySystemSound(_ inSystemSoundID: SystemSoundID) {
    SystemSounds.shared.play(inSystemSoundID, completion: nil)
}

/// Plays the sound as an alert (here the same as ``AudioServicesPlaySystemSound(_:)``: there is no
/// vibration to add).
public func AudioServicesPlayAlertSound(_ inSystemSoundID: SystemSoundID) {
    SystemSounds.shared.play(inSystemSoundID, completion: nil)
}

/// Plays the sound and calls `inCompletionBlock` once when it has ended (on a private queue).
public func AudioServicesPlaySystemSoundWithCompletion(_ inSystemSoundID: SystemSoundID, _ inCompletionBlock: (() -> Void)?) {
    SystemSounds.shared.play(inSystemSoundID, completion: inCompletionBlock.map { block in SoundCompletionBlock(value: block) })
}

public func AudioServicesPlayAlertSoundWithCompletion(_ inSystemSoundID: SystemSoundID, _ inCompletionBlock: (() -> Void)?) {
    SystemSounds.shared.play(inSystemSoundID, completion: inCompletionBlock.map { block in SoundCompletionBlock(value: block) })
}

/// Plays the sound and returns when it has ended.
public func AudioServicesPlaySystemSoundWithCompletion(_ inSystemSoundID: SystemSoundID) async {
    await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
        AudioServicesPlaySystemSoundWithCompletion(inSystemSoundID) { done.resume() }
    }
}

public func AudioServicesPlayAlertSoundWithCompletion(_ inSystemSoundID: SystemSoundID) async {
    await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
        AudioServicesPlayAlertSoundWithCompletion(inSystemSoundID) { done.resume() }
    }
}

/// Calls `inCompletionRoutine` each time the sound ends, on `inRunLoop` in `inRunLoopMode` (the
/// main run loop and the common modes when `nil`, as Apple's: a program must run that run loop to
/// hear it). One routine per sound; adding another replaces it.
@discardableResult
public func AudioServicesAddSystemSoundCompletion(
    _ inSystemSoundID: SystemSoundID, _ inRunLoop: CFRunLoop?, _ inRunLoopMode: CFString?,
    _ inCompletionRoutine: AudioServicesSystemSoundCompletionProc, _ inClientData: UnsafeMutableRawPointer?
) -> OSStatus {
    let runLoop = inRunLoop?.runLoop ?? RunLoop.main
    let mode = RunLoop.Mode(inRunLoopMode.map { $0 as String } ?? RunLoop.Mode.common.rawValue)
    return SystemSounds.shared.setCompletion(inSystemSoundID, SystemSounds.Completion(routine: inCompletionRoutine, clientData: inClientData, runLoop: runLoop, mode: mode))
}

public func AudioServicesRemoveSystemSoundCompletion(_ inSystemSoundID: SystemSoundID) {
    _ = SystemSounds.shared.setCompletion(inSystemSoundID, nil)
}

/// The size of a property's value (4 bytes for both) and whether it can be set.
@discardableResult
public func AudioServicesGetPropertyInfo(
    _ inPropertyID: AudioServicesPropertyID, _ inSpecifierSize: UInt32, _ inSpecifier: UnsafeRawPointer?,
    _ outPropertyDataSize: UnsafeMutablePointer<UInt32>?, _ outWritable: UnsafeMutablePointer<DarwinBoolean>?
) -> OSStatus {
    guard inPropertyID == kAudioServicesPropertyIsUISound || inPropertyID == kAudioServicesPropertyCompletePlaybackIfAppDies else {
        return kAudioServicesUnsupportedPropertyError
    }
    guard inSpecifierSize == 4, inSpecifier != nil else { return kAudioServicesBadSpecifierSizeError }
    outPropertyDataSize?.pointee = 4
    outWritable?.pointee = true
    return kAudioServicesNoError
}

@discardableResult
public func AudioServicesGetProperty(
    _ inPropertyID: AudioServicesPropertyID, _ inSpecifierSize: UInt32, _ inSpecifier: UnsafeRawPointer?,
    _ ioPropertyDataSize: UnsafeMutablePointer<UInt32>, _ outPropertyData: UnsafeMutableRawPointer?
) -> OSStatus {
    guard inPropertyID == kAudioServicesPropertyIsUISound || inPropertyID == kAudioServicesPropertyCompletePlaybackIfAppDies else {
        return kAudioServicesUnsupportedPropertyError
    }
    guard inSpecifierSize == 4, let inSpecifier else { return kAudioServicesBadSpecifierSizeError }
    guard ioPropertyDataSize.pointee >= 4, let outPropertyData else { return kAudioServicesBadPropertySizeError }
    let id = inSpecifier.loadUnaligned(as: SystemSoundID.self)
    guard let isUI = SystemSounds.shared.isUISound(id) else { return kAudioServicesSystemSoundUnspecifiedError }
    outPropertyData.storeBytes(of: inPropertyID == kAudioServicesPropertyIsUISound ? (isUI ? 1 : 0) : UInt32(1), as: UInt32.self)
    ioPropertyDataSize.pointee = 4
    return kAudioServicesNoError
}

@discardableResult
public func AudioServicesSetProperty(
    _ inPropertyID: AudioServicesPropertyID, _ inSpecifierSize: UInt32, _ inSpecifier: UnsafeRawPointer?, _ inPropertyDataSize: UInt32,
    _ inPropertyData: UnsafeRawPointer?
) -> OSStatus {
    guard inPropertyID == kAudioServicesPropertyIsUISound || inPropertyID == kAudioServicesPropertyCompletePlaybackIfAppDies else {
        return kAudioServicesUnsupportedPropertyError
    }
    guard inSpecifierSize == 4, let inSpecifier else { return kAudioServicesBadSpecifierSizeError }
    guard inPropertyDataSize == 4, let inPropertyData else { return kAudioServicesBadPropertySizeError }
    let id = inSpecifier.loadUnaligned(as: SystemSoundID.self)
    let value = inPropertyData.loadUnaligned(as: UInt32.self)
    guard SystemSounds.shared.isUISound(id) != nil else { return kAudioServicesSystemSoundUnspecifiedError }
    if inPropertyID == kAudioServicesPropertyCompletePlaybackIfAppDies { return value != 0 ? kAudioServicesNoError : kAudioServicesUnsupportedPropertyError }
    SystemSounds.shared.setUISound(id, value != 0)
    return kAudioServicesNoError
}

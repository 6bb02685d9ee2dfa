import Synchronization

/// A parameter a unit has: where it lives, its range and its default.
struct ParameterSpec: Sendable {
    var id: AudioUnitParameterID
    var scope: AudioUnitScope = kAudioUnitScope_Global
    var element: AudioUnitElement = 0
    var minimum: Float
    var maximum: Float
    var defaultValue: Float
}

/// A unit's parameter values: set by any thread, read by the render thread, each an atomic cell,
/// so neither side waits for the other. The set of parameters is fixed when the unit is made.
final class ParameterTable: @unchecked Sendable {
    let specs: [ParameterSpec]
    private let values: UnsafeMutablePointer<Atomic<UInt32>>

    init(_ specs: [ParameterSpec]) {
        self.specs = specs
        values = .allocate(capacity: max(specs.count, 1))
        for (i, spec) in specs.enumerated() { (values + i).initialize(to: Atomic(spec.defaultValue.bitPattern)) }
    }

    deinit {
        values.deinitialize(count: specs.count)
        values.deallocate()
    }

    /// The index of a parameter, `nil` when the unit has none there (control threads).
    func index(_ id: AudioUnitParameterID, scope: AudioUnitScope, element: AudioUnitElement) -> Int? {
        specs.firstIndex { $0.id == id && $0.scope == scope && $0.element == element }
    }

    /// Whether any parameter lives in `scope` (to tell a bad scope from a bad ID).
    func hasScope(_ scope: AudioUnitScope) -> Bool { specs.contains { $0.scope == scope } }

    /// The value at `index` (any thread, the render thread included).
    subscript(index: Int) -> Float { Float(bitPattern: values[index].load(ordering: .relaxed)) }

    /// Sets the value at `index`, clamped to the parameter's range.
    func set(_ index: Int, _ value: Float) {
        let spec = specs[index]
        values[index].store(min(max(value, spec.minimum), spec.maximum).bitPattern, ordering: .relaxed)
    }

    func resetToDefaults() {
        for (i, spec) in specs.enumerated() { values[i].store(spec.defaultValue.bitPattern, ordering: .relaxed) }
    }
}

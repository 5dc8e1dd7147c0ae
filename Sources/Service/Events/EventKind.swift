/// Events a subscription can ask for.
enum EventKind: String, CaseIterable {
    case stateChange, progress
}

/// A subscription: one object of the principal, or all of them (present and future),
/// for some events, delivered to the connection that made it.
final class Subscription {
    let id: String
    weak var session: ClientSession?
    /// nil: every object of the principal.
    let handle: String?
    let events: Set<EventKind>
    /// Whether its connection's `onStateChange` carry the request's `method` and `url`
    /// (redacted as `list` shows it): what a watcher (the dashboard) needs to show a
    /// request it did not open, a `fetch`'s included, which `list` does not show.
    let details: Bool

    init(id: String, session: ClientSession, handle: String?, events: Set<EventKind>, details: Bool = false) {
        self.id = id
        self.session = session
        self.handle = handle
        self.events = events
        self.details = details
    }

    /// Whether it asked for `kind` events of `object`.
    func covers(_ object: any SessionObject, _ kind: EventKind) -> Bool {
        (handle == nil || handle == object.handle) && events.contains(kind)
    }
}

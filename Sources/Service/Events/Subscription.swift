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
    /// The least time, in milliseconds, between two `onProgress` notes of one request
    /// to this subscriber (`NotificationHub`).
    let progressInterval: UInt64

    init(id: String, session: ClientSession, handle: String?, events: Set<EventKind>, details: Bool = false,
         progressInterval: UInt64 = NotificationHub.defaultProgressInterval) {
        self.id = id
        self.session = session
        self.handle = handle
        self.events = events
        self.details = details
        self.progressInterval = progressInterval
    }

    /// Whether it asked for `kind` events of `object`.
    func covers(_ object: any SessionObject, _ kind: EventKind) -> Bool {
        (handle == nil || handle == object.handle) && events.contains(kind)
    }
}

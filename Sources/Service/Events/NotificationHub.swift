import EventLoop
import JSON
import JSONRPC

/// Delivers `onStateChange` and `onProgress` to the connections that asked for them.
///
/// State changes go out at once, each exactly once per connection, in order; they are
/// never dropped (a connection that cannot keep up is closed by its out-queue limit).
///
/// Progress is paced per connection: each gets at most one note per request every
/// `progressInterval` milliseconds of its own (its subscription's, the shortest if it
/// has several covering the request; `defaultProgressInterval` for the connection that
/// started the request when it asked for progress that way (`openerGetsProgress`) and
/// has no subscription of its own), each note saying what moved since that
/// connection's previous one (`ProgressCursor`). A request whose figures changed is
/// marked; one timer, armed for the earliest moment a marked request owes some
/// connection a note, sends what is due and leaves the request marked while any
/// connection is still behind. A connection that is up to date owes nothing, but when
/// the figures of a marked request change it may be owed a note before the ones still
/// behind are: the request keeps when that is (`progressWake`), and the change arms the
/// timer for it, so a 50 ms subscriber beside a 1000 ms one keeps its own pace. Before
/// DONE every connection that is behind gets the final figures at once
/// (`flushProgress`), whatever its pace.
final class NotificationHub {
    static let defaultProgressInterval: UInt64 = 100
    static let minimumProgressInterval: UInt64 = 10
    private let loop: Loop
    private let timer: Timer
    /// When (loop time, ms) the timer fires, while it is armed.
    private var armedFor: UInt64?
    private var marked: [ObjectIdentifier: HTTPRequest] = [:]

    init(loop: Loop) throws {
        self.loop = loop
        timer = try Timer(loop: loop)
    }

    func close() { timer.close() }

    /// The sessions that receive `kind` events of `object` — its opener (for state
    /// changes) and its principal's subscribers — each once. The one notification path
    /// of every kind of object.
    func recipients(of object: any SessionObject, _ kind: EventKind) -> [ClientSession] {
        let subscriptions = object.principal.subscriptions
        if subscriptions.isEmpty {  // the usual case: at most the opener, and nothing to merge
            guard kind == .stateChange, let s = object.opener, s.connection.isOpen else { return [] }
            return [s]
        }
        var seen = Set<ObjectIdentifier>()
        var out: [ClientSession] = []
        func add(_ s: ClientSession?) {
            guard let s, s.connection.isOpen, seen.insert(ObjectIdentifier(s)).inserted else { return }
            out.append(s)
        }
        if kind == .stateChange { add(object.opener) }
        for sub in subscriptions.values where sub.covers(object, kind) { add(sub.session) }
        return out
    }

    /// Sends an event of an object whose events all count as state changes (a raw
    /// socket's `socket.onOpen`, `onRead`, `onErr`, `onClose`): to its opener and to the
    /// subscribers of its state changes.
    func notify(_ object: any SessionObject, _ method: String, _ params: JSONValue) {
        for s in recipients(of: object, .stateChange) { s.connection.notify(method, params) }
    }

    /// Tells subscribers that `request` entered `state`. The state is passed in, not read
    /// from the request: the machine may already be further on when several transitions
    /// happen in one turn, and each must be reported as itself.
    func stateChanged(_ request: HTTPRequest, to state: RequestState) {
        let targets = recipients(of: request, .stateChange)
        guard !targets.isEmpty else { return }
        let params: JSONValue = [
            "request": .string(request.handle), "state": .int(Int64(state.rawValue)),
            "stateName": .string(state.name), "status": .int(Int64(request.status)),
            "statusText": .string(request.statusText), "attempt": .int(Int64(request.attempt)),
        ]
        var detailed: JSONValue?
        let wantDetails = sessionsWantingDetails(of: request)
        for s in targets {
            guard wantDetails.contains(ObjectIdentifier(s)) else {
                s.connection.notify("onStateChange", params)
                continue
            }
            if detailed == nil, case .object(var o) = params {
                o["method"] = .string(request.method)
                o["url"] = .string(request.displayURL)
                detailed = .object(o)
            }
            s.connection.notify("onStateChange", detailed!)
        }
    }

    /// The sessions holding a subscription with `details` that covers `request`: one
    /// pass over the principal's subscriptions, as `recipients` makes.
    private func sessionsWantingDetails(of request: HTTPRequest) -> Set<ObjectIdentifier> {
        var out = Set<ObjectIdentifier>()
        for sub in request.principal.subscriptions.values where sub.details && sub.covers(request, .stateChange) {
            if let s = sub.session { out.insert(ObjectIdentifier(s)) }
        }
        return out
    }

    /// The connections that receive `onProgress` of `request`, each once, with its
    /// pace: its subscriptions' shortest interval, or the default for the opener when
    /// the request sends it progress (`openerGetsProgress`).
    func progressRecipients(of request: HTTPRequest) -> [(session: ClientSession, interval: UInt64)] {
        var index: [ObjectIdentifier: Int] = [:]
        var out: [(session: ClientSession, interval: UInt64)] = []
        for sub in request.principal.subscriptions.values where sub.covers(request, .progress) {
            guard let s = sub.session, s.connection.isOpen else { continue }
            if let i = index[ObjectIdentifier(s)] {
                out[i].interval = min(out[i].interval, sub.progressInterval)
            } else {
                index[ObjectIdentifier(s)] = out.count
                out.append((s, sub.progressInterval))
            }
        }
        if request.openerGetsProgress, let o = request.opener, o.connection.isOpen, index[ObjectIdentifier(o)] == nil {
            out.append((o, Self.defaultProgressInterval))
        }
        return out
    }

    /// Marks a request whose progress changed; its notes go out when each connection's
    /// pace allows.
    func progressed(_ request: HTTPRequest) {
        guard !request.progressPending else {
            // Marked: the ones behind have the timer; an up-to-date one is behind now.
            if let wake = request.progressWake {
                request.progressWake = nil
                arm(at: wake)
            }
            return
        }
        // Nobody can be listening: no subscription at all, and the opener not told.
        if request.principal.subscriptions.isEmpty, !request.openerGetsProgress { return }
        request.progressPending = true
        marked[ObjectIdentifier(request)] = request
        if let due = report(request, force: false) { arm(at: due) } else { unmark(request) }
    }

    /// Sends every connection that is behind the request's current figures now (before
    /// its DONE), so the last figures arrive before the end.
    func flushProgress(of request: HTTPRequest) {
        guard request.progressPending else { return }
        unmark(request)
        _ = report(request, force: true)
    }

    /// Drops a released object's pending notes.
    func forget(_ object: any SessionObject) {
        guard let request = object as? HTTPRequest else { return }
        unmark(request)
    }

    private func unmark(_ request: HTTPRequest) {
        marked[ObjectIdentifier(request)] = nil
        request.progressPending = false
        request.progressWake = nil
    }

    private func arm(at due: UInt64) {
        if let at = armedFor, at <= due, timer.isActive { return }
        armedFor = due
        let now = loop.now
        timer.start(timeout: due > now ? due - now : 0) { [unowned self] in tick() }
    }

    private func tick() {
        armedFor = nil
        var next: UInt64?
        for r in Array(marked.values) {
            if let due = report(r, force: false) {
                next = min(next ?? due, due)
            } else {
                unmark(r)
            }
        }
        if let next { arm(at: next) }
    }

    /// Sends the notes that are due (all that are behind, with `force`); returns when
    /// the next one falls due, or nil when every connection has the current figures.
    /// Notes in `progressWake` when the first of the up-to-date connections may have its
    /// next note.
    private func report(_ request: HTTPRequest, force: Bool) -> UInt64? {
        let now = loop.now
        var next: UInt64?
        var wake: UInt64?
        for (s, interval) in progressRecipients(of: request) {
            let key = ObjectIdentifier(s)
            var cursor = request.progressCursors[key].flatMap { $0.session === s ? $0 : nil } ?? ProgressCursor(session: s)
            if cursor.last == request.progress {
                wake = min(wake ?? cursor.sentAt + interval, cursor.sentAt + interval)
                continue
            }
            if !force, cursor.last != nil, now < cursor.sentAt + interval {
                next = min(next ?? cursor.sentAt + interval, cursor.sentAt + interval)
                continue
            }
            s.connection.notify("onProgress", request.progressNote(since: cursor.last))
            cursor.last = request.progress
            cursor.sentAt = now
            request.progressCursors[key] = cursor
            wake = min(wake ?? now + interval, now + interval)
        }
        request.progressWake = wake
        return next
    }
}

import EventLoop
import JSON
import JSONRPC

/// Delivers `onStateChange` and `onProgress` to the connections that asked for them.
///
/// State changes go out at once, each exactly once per connection, in order; they are
/// never dropped (a connection that cannot keep up is closed by its out-queue limit).
/// Progress is coalesced: a request that progressed is marked, and one timer, running
/// only while something is marked, reports each marked request at most once per tick
/// (50 ms), so a fast transfer costs a subscriber twenty small messages a second.
final class NotificationHub {
    static let progressInterval: UInt64 = 50
    private let timer: Timer
    private var marked: [ObjectIdentifier: HTTPRequest] = [:]

    init(loop: Loop) throws {
        timer = try Timer(loop: loop)
    }

    func close() { timer.close() }

    /// The sessions that receive `kind` events of `object` — its opener (for state
    /// changes) and its principal's subscribers — each once. The one notification path
    /// of every kind of object.
    func recipients(of object: any SessionObject, _ kind: EventKind) -> [ClientSession] {
        var seen = Set<ObjectIdentifier>()
        var out: [ClientSession] = []
        func add(_ s: ClientSession?) {
            guard let s, s.connection.isOpen, seen.insert(ObjectIdentifier(s)).inserted else { return }
            out.append(s)
        }
        if kind == .stateChange { add(object.opener) }
        for sub in object.principal.subscriptions.values where sub.covers(object, kind) { add(sub.session) }
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

    /// Marks a request whose progress changed; reported at the next tick.
    func progressed(_ request: HTTPRequest) {
        guard !request.progressPending else { return }
        request.progressPending = true
        marked[ObjectIdentifier(request)] = request
        if !timer.isActive {
            timer.start(timeout: Self.progressInterval, repeat: Self.progressInterval) { [unowned self] in tick() }
        }
    }

    /// Reports a request's pending progress now (before its DONE), so the last figures
    /// arrive before the end.
    func flushProgress(of request: HTTPRequest) {
        guard request.progressPending else { return }
        marked[ObjectIdentifier(request)] = nil
        report(request)
    }

    /// Drops a released object's pending report.
    func forget(_ object: any SessionObject) {
        guard let request = object as? HTTPRequest else { return }
        marked[ObjectIdentifier(request)] = nil
        request.progressPending = false
    }

    private func tick() {
        let due = marked.values
        marked = [:]
        for r in due { report(r) }
        if marked.isEmpty { timer.stop() }
    }

    private func report(_ request: HTTPRequest) {
        request.progressPending = false
        let delta = request.takeProgressDelta()
        let targets = recipients(of: request, .progress)
        guard !targets.isEmpty else { return }
        let p = request.progress
        let params: JSONValue = [
            "request": .string(request.handle), "bytesWritten": .int(delta), "totalBytesWritten": .int(p.uploaded),
            "totalBytesExpectedToWrite": .int(p.uploadTotal), "totalBytesReceived": .int(p.downloaded),
            "totalBytesExpectedToReceive": .int(p.downloadTotal),
        ]
        for s in targets { s.connection.notify("onProgress", params) }
    }
}

import Foundation
import HTTPEngine
import JSON
import JSONRPC

/// A request object living in the server: XMLHttpRequest-style semantics
/// (docs/guide/requests.md, api/openrpc.json) on a libcurl transfer. The state machine decides; this class performs its actions:
/// it starts and cancels transfers, keeps the response and the unread body, and tells
/// subscribers about every transition.
///
/// Lifetime: the principal's table holds it from `create` to `release`, or until the
/// connection that created it closes (unless it was detached first), or until it has
/// gone unused for the request TTL (`ObjectLifetime`). The engine's `cancel` guarantees that no event
/// of a stopped transfer arrives afterwards, so a late completion of a transfer that
/// `open` or `abort` replaced is never reported.
///
/// Confined to the loop's thread.
final class HTTPRequest: SessionObject, TransferDelegate {
    static let kind = "request"
    let handle: String
    unowned let principal: Principal
    /// The connection that created it; its requests end with it.
    weak var creator: ClientSession?
    unowned let env: ObjectEnvironment
    var settings: RequestSettings { env.requestSettings }
    var hub: NotificationHub { env.hub }

    var machine = RequestStateMachine()
    var state: RequestState { machine.state }

    // What `open` and the pre-send calls configured.
    var method = "GET"
    var url = ""
    var isAsync = true
    var user: String?
    var password: String?
    var auth: AuthScheme = .basic
    /// The headers to send, in the order first set; `headerIndex` finds one by its
    /// lower-case name, so setting many costs linear time.
    private(set) var headers: [(name: String, value: String)] = []
    private var headerIndex: [String: Int] = [:]
    /// The body serializer (`setPostValue`, `setJSONBody`, `addMultipartPart`, and
    /// fetch's `form`, `json`, `multipart`): built into the body at `send`.
    var serializer: RequestBody
    // What the client's calls made this request keep, in the principal's budget
    // (`HeldBytes`): the headers (until `open`), `open`'s user name and password (until
    // the next `open`), and the copy a send keeps of its request, body included (until
    // the next `open`). The serializer counts its own.
    let heldHeaders: HeldBytes
    let heldCredentials: HeldBytes
    let heldSend: HeldBytes
    /// The response heads of the current send (every hop's lines), until the response
    /// is cleared (`open`) or the request released.
    let heldHead: HeldBytes
    var followRedirects = true
    /// This request's own redirect limit (fetch's `maxRedirects`); nil: the server's.
    var maxRedirects: Int?
    /// For `fetch`, which needs the whole body at once: a body over the buffer limit
    /// ends the request with a failure instead of pausing the transfer.
    var failsWhenBufferFull = false
    var multiplexing = true
    // TLS and proxy choices of the pre-send options (`Methods/TLSMethods.swift`,
    // `Methods/ProxyMethods.swift`). Kept across `open`, like every pre-send option;
    // `close` switches the verifications back on, as `close` does (api/openrpc.json).
    var verifyPeer = true
    var verifyHost = true
    var clientCertificate: ClientCertificate?
    var pinnedPublicKey: String?
    /// This request's own proxy; it wins over the principal's secure communication.
    var proxy: ProxySettings?
    /// Cookies from the principal's jar are sent and received ones stored there;
    /// `disableCookieHandling` turns both off for this request.
    var handlesCookies = true
    /// The connection that opened it, told about transitions unless it said not to be.
    weak var opener: ClientSession?

    // The response.
    var status = 0
    var statusText = ""
    var responseHeaders: HeaderFields = []
    /// The unread body.
    let body: UnreadBytes
    /// Where the body goes instead, for a `download` (`HTTPRequest+Download.swift`).
    var download: DownloadFile?
    /// An `upload`'s file is sent with the method given (POST included), not made a PUT
    /// as `sendWithFile` does.
    var keepsMethodWithFile = false
    /// The transfer under way. Setting and clearing it (or `between`) keeps the
    /// principal's count of transfers in flight in step, whichever path ends it.
    var transfer: Transfer? {
        didSet { countInFlight() }
    }
    /// The wait between two attempts of a send: a question or a backoff
    /// (`HTTPRequest+Attempts.swift`). Setting it to nil does not cancel it; `stopAttempts`
    /// does.
    var between: Between? {
        didSet { countInFlight() }
    }
    private var countedInFlight = false
    /// The client paused this send (`HTTPRequest+Pause.swift`); every transfer of the
    /// send starts paused while it is set.
    var pausedByClient = false

    /// A send is in flight while it has a transfer or waits between attempts.
    private func countInFlight() {
        let now = transfer != nil || between != nil
        guard now != countedInFlight else { return }
        countedInFlight = now
        principal.transfersInFlight += now ? 1 : -1
    }

    // Attempts (`HTTPRequest+Attempts.swift`).
    /// `setRetryPolicy`'s, or `fetch`'s `retry`; nil: never retried on its own.
    var retryPolicy: RetryPolicy?
    /// The attempt of the current send (1 for the first); 0 before any send.
    var attempt = 0
    /// What the current send sends; an interceptor's replacement changes it.
    var planned: TransferRequest?
    /// A transfer whose response is thrown away for a retry.
    var discarding: Transfer?
    /// Body bytes not yet sent to the interceptor in `didReceiveData`.
    var pendingNoticeData: [UInt8] = []
    /// Body bytes received by the current transfer, for `--max-response-bytes`.
    var receivedBytes = 0
    /// Request body bytes the last transfer sent, noted when it ended (the response's
    /// clearing resets the progress figures), and when its send began: for the access log.
    var sentBytes = 0
    var sentAt: Double?
    /// The reason word of the failure that ended the current send with no response
    /// (`finish(failure:reason:)`), for its access-log entry and `/metrics`.
    var failureReason: String?
    var pendingHead: ResponseHead?
    var syncCall: RPCCall?
    var onDone: (() -> Void)?

    // Progress, paced per recipient by the hub (`HTTPRequest+Progress.swift`).
    var progress = TransferProgress(uploaded: 0, uploadTotal: 0, downloaded: 0, downloadTotal: 0)
    /// What each connection was last told, by session.
    var progressCursors: [ObjectIdentifier: ProgressCursor] = [:]
    var progressPending = false
    /// While pending: the earliest moment a connection that has the current figures may
    /// get its next note, should the figures change (`NotificationHub.progressed`).
    var progressWake: UInt64?
    /// The opener hears `onProgress` too, at the default pace unless a subscription of
    /// its own sets another. Off for the object API, whose `open {subscribe}` promises
    /// state changes only (progress is `subscribe`'s); the calls that start a whole
    /// transfer in one go and report on it (`upload`, `download`, `fetch {subscribe}`)
    /// switch it on.
    var openerGetsProgress = false

    /// When a call last named this request, or it last changed state, on the server's
    /// clock: `ObjectLifetime` releases it when that is `--request-ttl` ago.
    var lastUsed: Double

    init(handle: String, principal: Principal, creator: ClientSession?, environment: ObjectEnvironment) {
        self.handle = handle
        self.principal = principal
        self.creator = creator
        self.env = environment
        body = UnreadBytes(principal: principal)
        serializer = RequestBody(held: HeldBytes(principal: principal))
        heldHeaders = HeldBytes(principal: principal)
        heldCredentials = HeldBytes(principal: principal)
        heldSend = HeldBytes(principal: principal)
        heldHead = HeldBytes(principal: principal)
        lastUsed = environment.clock.now()
    }

    /// Restarts the idle time that expires the request.
    func touch() { lastUsed = env.clock.now() }

    /// Not in flight: UNSENT, OPENED or DONE.
    var isIdle: Bool { !state.isInFlight }

    var listEntry: JSONValue {
        var entry: JSONObject = [
            "request": .string(handle), "kind": .string(Self.kind), "state": .int(Int64(state.rawValue)),
            "stateName": .string(state.name), "method": .string(method), "url": .string(displayURL),
            "status": .int(Int64(status)),
        ]
        markPaused(&entry)
        return .object(entry)
    }

    // MARK: Calls

    /// Refused (`limit_exceeded`, nothing changed) when the user name and password would
    /// take the principal past its budget.
    func open(method: String, url: String, async: Bool, user: String?, password: String?, auth: AuthScheme,
              opener: ClientSession?) throws(RPCError) {
        try heldCredentials.resize(to: (user?.utf8.count ?? 0) + (password?.utf8.count ?? 0), for: "open")
        self.method = method
        self.url = url
        self.isAsync = async
        self.user = user
        self.password = password
        self.auth = auth
        self.opener = opener
        perform(machine.open())
    }

    /// Adds a header to send. The one way in for headers, whoever supplies them: the
    /// syntax and the reserved names are checked here (`HTTPSyntax.checkHeader`), and
    /// the bytes are counted in the principal's budget (refused past it, `HeldBytes`).
    func setRequestHeader(_ name: String, _ value: String) throws(RPCError) {
        try HTTPSyntax.checkHeader(name, value)
        guard machine.acceptsHeaders else { throw misuse("setRequestHeader", allowed: "OPENED") }
        // As XMLHttpRequest does, a header set twice is sent once with both values.
        let key = name.lowercased()
        if let i = headerIndex[key] {
            try heldHeaders.hold(2 + value.utf8.count, for: "setRequestHeader")
            headers[i].value += ", " + value
        } else {
            try heldHeaders.hold(HeldBytes.entry(name, value), for: "setRequestHeader")
            headerIndex[key] = headers.count
            headers.append((name, value))
        }
    }

    /// Forgets the headers (`open`), and gives their bytes back.
    func clearHeaders() {
        headers = []
        headerIndex = [:]
        heldHeaders.releaseAll()
    }

    func setPostValue(_ key: String, _ value: String) throws(RPCError) {
        guard machine.acceptsOptions else { throw misuse("setPostValue", allowed: "UNSENT or OPENED") }
        try serializer.addFormValue(key, value)
    }

    func setJSONBody(_ value: JSONValue) throws(RPCError) {
        guard machine.acceptsOptions else { throw misuse("setJSONBody", allowed: "UNSENT or OPENED") }
        try serializer.setJSON(value)
    }

    func addMultipartPart(_ part: MultipartPart) throws(RPCError) {
        guard machine.acceptsOptions else { throw misuse("addMultipartPart", allowed: "UNSENT or OPENED") }
        try serializer.addPart(part)
    }

    /// Empties the serializer, whichever kind it holds.
    func clearPostValues() throws(RPCError) {
        guard machine.acceptsOptions else { throw misuse("clearPostValues", allowed: "UNSENT or OPENED") }
        serializer.clear()
    }

    /// Checks that a pre-send option may be changed now.
    func checkOptionsAllowed(_ method: String) throws(RPCError) {
        guard machine.acceptsOptions else { throw misuse(method, allowed: "UNSENT or OPENED") }
    }

    /// Starts the transfer. For a synchronous request the call is answered at DONE.
    /// Refuses `method` (`send`, `sendData`, `sendWithFile`) unless the machine allows a
    /// send now.
    func checkCanSend(_ method: String) throws(RPCError) {
        do { try machine.checkSend() } catch { throw misuse(method, allowed: "OPENED") }
    }

    /// Whether a body given to `send` is dropped, as XHR's `send()` drops it: a GET or
    /// HEAD goes out with no body and no `Content-Length`, whatever `body`, `bodyBase64`
    /// or `sendData` carried (an empty `body` put `Content-Length: 0` on the wire). The
    /// serializers and `sendWithFile` change the method instead, as before.
    static func dropsBody(_ method: String) -> Bool { method == "GET" || method == "HEAD" }

    func send(body: TransferBody, timeout: Double, call: RPCCall?) throws(RPCError) -> Bool {
        try checkCanSend("send")
        switch body {
        case .none: break
        case .bytes: try serializer.checkNoOtherBody("a body of its own ('body', 'bodyBase64' or sendData's 'data')")
        case .file: try serializer.checkNoOtherBody("a file (sendWithFile)")
        case .segments: try serializer.checkNoOtherBody("a body of its own")
        }
        let limits = principal.limits
        try principal.check("transfers", current: principal.transfersInFlight, max: limits.transfers,
                            "Too many transfers in flight; wait for one to finish")
        try principal.check("bufferedBytes", current: principal.bufferedBytes, max: limits.bufferedBytes,
                            "Too many unread response bytes; read or release some requests first")
        var request = TransferRequest(method: method, url: url)
        request.headers = headers
        request.timeout = timeout
        request.followRedirects = followRedirects
        request.maxRedirects = maxRedirects ?? settings.maxRedirects
        request.user = user
        request.password = password
        request.auth = auth
        request.multiplexing = multiplexing
        request.decodesContent = download == nil
        request.verifyPeer = verifyPeer
        request.verifyHost = verifyHost
        request.clientCertificate = clientCertificate
        request.pinnedPublicKey = pinnedPublicKey
        request.proxy = proxy ?? (principal.secureCommunication ? env.egressProxy : nil)
        if handlesCookies { request.cookieJar = principal.cookieJar }
        let serialized = try serializer.encoded()
        switch body {
        case .none where serialized != nil:
            guard let (serializedBody, contentType) = serialized else { break }
            request.body = serializedBody
            if !headers.contains(where: { $0.name.lowercased() == "content-type" }) {
                request.headers.append(("Content-Type", contentType))
            }
            if method == "GET" { request.method = "POST" }
        case .file:
            request.body = body
            if ["GET", "HEAD", "POST"].contains(method), !keepsMethodWithFile { request.method = "PUT" }
        case .bytes where Self.dropsBody(method), .segments where Self.dropsBody(method):
            break  // XHR: "If this's request method is GET or HEAD, then set body to null"
        default:
            request.body = body
        }
        // The copy this send keeps, counted before anything starts: refused past the
        // budget, the send changes nothing.
        try heldSend.resize(to: HeldBytes.ofSend(request), for: "send")
        planned = request
        attempt = 1
        let asks = interceptor(for: .willSendRequest) != nil
        if !asks {
            // Started before the transition, so that a refused start is this call's error
            // and changes nothing.
            do {
                try startTransfer(request)
            } catch let e as TransferFailure {
                throw RPCError.invalidParams("cannot send: \(e.text)")
            } catch {
                throw RPCError.internalError("cannot send: \(error)")
            }
        }
        receivedBytes = 0
        sentBytes = 0
        sentAt = env.clock.now()
        syncCall = isAsync ? nil : call
        do {
            perform(try machine.send())
        } catch {
            preconditionFailure("send was checked to be in OPENED: \(error)")
        }
        if asks { beginAttempt() }
        return isAsync
    }

    /// Stops a wait between attempts (a question is forgotten, a backoff dropped).
    func stopAttempts() {
        between?.cancel()
        between = nil
        discarding = nil
        pendingNoticeData = []
    }

    func abort() -> Bool {
        let (aborted, actions) = machine.abort()
        perform(actions)
        return aborted
    }

    /// `close` (api/openrpc.json): after DONE, the connections this request used are not reused,
    /// and every pre-send option is back at its default (`resetOptions`), so the next
    /// send verifies again and goes out as from a new object.
    func close() -> Bool {
        guard state == .done, let t = lastTransfer else { return false }
        env.engine.closeConnections(usedBy: t)
        lastTransfer = nil
        resetOptions()
        return true
    }

    /// Every option a client can set on the object before a send, back to its default
    /// (the values of a new object): the checks the `disable…` calls switched off (peer
    /// and host verification, following redirects, cookie handling), `setPipelining`,
    /// the client certificate, the pin, the proxy, the retry policy and the post values.
    /// A new per-request option belongs here too, or `close` leaves it set.
    func resetOptions() {
        verifyPeer = true
        verifyHost = true
        followRedirects = true
        handlesCookies = true
        multiplexing = true
        clientCertificate = nil
        pinnedPublicKey = nil
        proxy = nil
        retryPolicy = nil
        maxRedirects = nil
        serializer.clear()
    }
    var lastTransfer: Transfer?

    /// Ends the object: aborts a transfer under way and answers a waiting sync send.
    func release() {
        _ = abort()
        dropDownload()
        transfer = nil
        lastTransfer = nil
        body.removeAll()
        clearHeaders()
        serializer.clear()
        heldCredentials.releaseAll()
        planned = nil
        heldSend.releaseAll()
        heldHead.releaseAll()
        if let call = syncCall {
            syncCall = nil
            replySummary(to: call)
        }
    }

    /// Runs `body` once the request reaches DONE (used by `fetch`).
    func whenDone(_ body: @escaping () -> Void) { onDone = body }

    /// Reads up to `maxBytes` of the unread body. With `utf8`, a character split at the
    /// end is held back for the next call, and bytes that are not UTF-8 are refused.
    ///
    /// The result's members, `data, encoding, bytes, done`, are written straight into
    /// `result`, the response's (every object request reads its body here;
    /// `UnreadBytes.read`). Nothing is written or taken when it throws.
    func readBody(maxBytes: Int, encoding: BodyEncoding, into result: inout JSONObjectWriter) throws(RPCError) {
        _ = try body.read(maxBytes: maxBytes, encoding: encoding, complete: state == .done,
                          refilling: transfer?.pauseReasons.contains(.noRoom) == true, into: &result)
        budgetFreed()
        if body.isEmpty { env.objectMayHaveSettled() }
        result.add(HTTPRequest.doneKey, .bool(state == .done && body.isEmpty))
    }

    private static let doneKey = JSONKey("done")

    /// The whole unread body (fetch), consumed.
    func takeBody() -> [UInt8] { body.takeAll() }

    /// Answers a synchronous send with `{state, stateName, status, statusText}`, written
    /// straight into the response with its keys written once (every such send ends here).
    func replySummary(to call: RPCCall, state: RequestState? = nil) {
        let state = state ?? self.state
        call.reply { o in
            o.add(Summary.state, int: Int64(state.rawValue))
            o.add(Summary.stateName, string: state.name)
            o.add(Summary.status, int: Int64(status))
            o.add(Summary.statusText, string: statusText)
        }
    }

    /// `replySummary`'s keys.
    private enum Summary {
        static let state = JSONKey("state")
        static let stateName = JSONKey("stateName")
        static let status = JSONKey("status")
        static let statusText = JSONKey("statusText")
    }

    /// The URL without credentials, for `list` and logs.
    var displayURL: String { URLRedaction.redact(url, secretNames: env.secretQueryNames) }

    func responseHeader(_ name: String) -> String {
        responseHeaders.joinedValues(of: name) ?? ""
    }

    var allResponseHeaders: String {
        responseHeaders.map { "\($0.name): \($0.value)" }.joined(separator: "\n")
    }

    func misuse(_ method: String, allowed: String) -> RPCError {
        ServiceError.misuse(method, allowed: allowed, state: state)
    }
}

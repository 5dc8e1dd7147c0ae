import HTTPEngine
import JSONRPC

/// Who is calling. Everything a client creates belongs to its principal, and a
/// principal sees only its own: another principal's handle reads as `unknown_handle`.
/// The principals are the config file's, plus "local", the Unix socket owner's, when no
/// configured principal claims the owner's uid.
final class Principal {
    let name: String
    let isAdmin: Bool
    /// Whether NEGOTIATE may be used: it authenticates as xhrpcd's own Kerberos
    /// identity, not as anything of this principal's (`ServerConfig.allowNegotiate`).
    let mayNegotiate: Bool
    let limits: PrincipalLimits
    /// Every object the principal's connections created and have not released, of
    /// every kind, by handle (`SessionObject`).
    private(set) var objects: [String: any SessionObject] = [:]
    /// Subscriptions made by this principal's connections, by id.
    var subscriptions: [String: Subscription] = [:]
    /// Whether this principal's requests go through the server's egress proxy
    /// (`enableSecureCommunication`); off until it asks. A request's own
    /// `enableHttpProxy` wins. Kept here, not on the connection, so that every
    /// connection of the principal sees the same routing and another principal none of it.
    var secureCommunication = false
    /// The connection registered as interceptor of this principal's requests
    /// (`intercept.register`), if any.
    var interceptor: Interceptor?
    /// The cookies of all this principal's requests (unless a request disables cookie
    /// handling), and of no one else's. It lives as long as the principal; `CookiePersistence`
    /// loads and saves its persistent part.
    let cookieJar: CookieJar
    /// The credentials this principal stored per protection space (`credentials.set`),
    /// used when a response challenges one of its requests (`HTTPRequest+Challenge.swift`);
    /// no other principal's requests ever look here. `CredentialPersistence` keeps it on disk.
    /// Its bytes count in `bufferedBytes`, whoever changes it (`credentials.set` checks
    /// the room first; a store loaded at start is counted as it is).
    var credentials = CredentialTable() {
        didSet { stored(credentials.byteCount - oldValue.byteCount) }
    }

    /// Connections acting for this principal now.
    var connections = 0
    /// Transfers started and not yet ended (`HTTPRequest` keeps it in step).
    var transfersInFlight = 0
    /// Every byte the server holds for the principal's calls, against its
    /// `bufferedBytes` limit: unread response and socket bytes (`UnreadBytes`), socket
    /// bytes queued for the peer, and what its calls stored — request headers, post
    /// values and bodies, credentials, cookies (`HeldBytes`, `credentials`,
    /// `countCookies`). docs/operations/budgets.md lists every channel, and the constant by which
    /// the total may pass the limit.
    private(set) var bufferedBytes = 0
    /// The part of `bufferedBytes` the principal's calls stored (`HeldBytes`, its
    /// credentials, its cookies), as opposed to bytes on their way (unread, unsent): a
    /// stop's drain waits for the latter only.
    private(set) var storedBytes = 0
    /// The bytes of the cookie jar, as last counted (`countCookies`).
    private var cookieBytes = 0
    /// Objects that stopped receiving because `bufferedBytes` reached the limit; resumed
    /// when reads bring it below.
    private var waitingForBudget: [ObjectIdentifier: any BudgetWaiter] = [:]
    /// What `server.stats` reports beyond the live figures.
    var usage = Usage()

    /// Throws when libcurl cannot make the cookie jar (out of memory).
    init(name: String, isAdmin: Bool = false, mayNegotiate: Bool = false, limits: PrincipalLimits = PrincipalLimits()) throws {
        self.name = name
        self.isAdmin = isAdmin
        self.mayNegotiate = mayNegotiate
        self.limits = limits
        cookieJar = try CookieJar()
    }

    /// Refuses NEGOTIATE to a principal not granted it (`forbidden`).
    func checkMayUse(_ auth: AuthScheme?) throws(RPCError) {
        guard auth == .negotiate, !mayNegotiate else { return }
        throw ServiceError.needsConfiguration("NEGOTIATE authenticates as xhrpcd's own Kerberos identity (its ticket cache), "
            + "whichever client asks, so principal '\(name)' needs it granted: \"negotiate\": true on the principal in the "
            + "config file, or --allow-negotiate for the socket owner")
    }

    /// The principal's object of kind `T` named `handle`; `unknown_handle` when it has
    /// none by that name (another principal's objects are not looked at), or when the
    /// name is an object of another kind.
    func object<T: SessionObject>(_ handle: String, as _: T.Type = T.self) throws(RPCError) -> T {
        guard let o = objects[handle] as? T else {
            throw ServiceError.unknownObject(kind: T.kind, handle)
        }
        return o
    }

    func request(_ handle: String) throws(RPCError) -> HTTPRequest { try object(handle) }

    /// The principal's objects of kind `T`.
    func objects<T: SessionObject>(of _: T.Type) -> [T] { objects.values.compactMap { $0 as? T } }

    /// How many objects of kind `T` the principal has: the limit checks at every
    /// `create` ask, and counting builds no array.
    func count<T: SessionObject>(of _: T.Type) -> Int { objects.values.count { $0 is T } }

    /// The principal's requests.
    var requests: [HTTPRequest] { objects(of: HTTPRequest.self) }

    /// The principal's raw sockets.
    var sockets: [RawSocket] { objects(of: RawSocket.self) }

    func add(_ o: any SessionObject) { objects[o.handle] = o }

    func remove(_ handle: String) {
        if let o = objects.removeValue(forKey: handle) { waitingForBudget[ObjectIdentifier(o)] = nil }
    }

    // MARK: Limits

    /// Refuses with `limit_exceeded` when `current` has reached the principal's `limit`
    /// (named as in the config file, so the client and the operator speak of the same thing).
    func check(_ limit: String, current: Int, max: Int, _ what: String) throws(RPCError) {
        guard current >= max else { return }
        throw ServiceError.limitExceeded(limit, max: max, "\(what): principal '\(name)' is at its limit of \(max)")
    }

    /// Refuses one more connection past the principal's limit (at accept for a Unix
    /// peer known by its uid, at `auth` otherwise).
    func checkRoomForConnection() throws(RPCError) {
        try check("connections", current: connections, max: limits.connections, "Too many connections")
    }

    var budgetExhausted: Bool { bufferedBytes >= limits.bufferedBytes }

    /// Records bytes added to (positive) or taken from (negative) a request's buffer; when
    /// the total falls below the limit, the requests that paused for it resume.
    func buffered(_ delta: Int) {
        bufferedBytes += delta
        guard delta < 0, !waitingForBudget.isEmpty, !budgetExhausted else { return }
        let waiting = waitingForBudget.values
        waitingForBudget = [:]
        for o in waiting { o.budgetFreed() }
    }

    /// Refuses with `limit_exceeded` (`data.limit` `bufferedBytes`) when `n` more bytes
    /// would take the principal past its budget: the one check of every call that makes
    /// the server keep bytes (`HeldBytes`, `socket.write`, `credentials.set`). `what`
    /// names the call.
    func checkRoom(_ n: Int, for what: String) throws(RPCError) {
        let max = limits.bufferedBytes
        guard n > 0, bufferedBytes + n > max else { return }
        throw ServiceError.limitExceeded(
            "bufferedBytes", max: max,
            "\(what): principal '\(name)' holds \(bufferedBytes) bytes (unread, unsent, or kept for its calls); \(n) more would pass its bufferedBytes limit of \(max). Read, close or release some first")
    }

    /// Records stored bytes added (positive) or dropped (negative): they count in
    /// `bufferedBytes` as bytes on their way do.
    func stored(_ delta: Int) {
        storedBytes += delta
        buffered(delta)
    }

    /// Unread and unsent bytes: `bufferedBytes` without what the calls stored.
    var bytesOnTheirWay: Int { bufferedBytes - storedBytes }

    /// Counts the cookie jar again. libcurl does not say when a jar changes, so this
    /// runs after every transfer that used it ended, and after a load or a clear
    /// (`CookiePersistence`). The cookies came in responses and cannot be refused: they
    /// count without a check, and a budget they fill refuses the next send.
    func countCookies() {
        let n = cookieJar.byteCount(perCookie: HeldBytes.perEntry)
        stored(n - cookieBytes)
        cookieBytes = n
    }

    /// `o` stopped receiving because the principal's buffers are full.
    func waitForBudget(_ o: any BudgetWaiter) { waitingForBudget[ObjectIdentifier(o)] = o }

    /// Counters kept for `server.stats`.
    struct Usage {
        /// JSON-RPC bytes of connections that have closed (open ones add their own).
        var bytesIn: UInt64 = 0
        var bytesOut: UInt64 = 0
        /// Response body bytes received from upstreams, and request body bytes sent.
        var httpBytesReceived: UInt64 = 0
        var httpBytesSent: UInt64 = 0
        /// Bytes raw sockets received from their peers, and wrote to them.
        var socketBytesReceived: UInt64 = 0
        var socketBytesSent: UInt64 = 0
        var connectionsAccepted: UInt64 = 0
        /// Error responses by reason word (or by the specification's error name).
        var errors: [String: UInt64] = [:]
    }
}

/// An object that stops receiving while its principal's unread bytes are at the
/// `bufferedBytes` limit, and is told when reads bring them below.
protocol BudgetWaiter: AnyObject {
    /// Room may have come back: resume receiving if this object's own buffer has room too.
    func budgetFreed()
}

extension HTTPRequest: BudgetWaiter {}

import EventLoop
import Foundation
import HTTPEngine
import JSON
import JSONRPC
import Logging
import SecureStream

/// The xhrpc service on one loop: listeners, connections, the method table, the
/// principals with their requests, and the transfer engine.
public final class Server {
    public static let name = "xhrpcd"
    public static let version = "0.1.0"

    public let config: ServerConfig
    let loop: Loop
    let logger: Logger
    /// The access log (`finished(_:)`): a logger of its own label, so that operators can
    /// tell its lines apart, at the server's level.
    let accessLog: Logger
    let registry = MethodRegistry()
    let dispatcher: Dispatcher
    let engine: TransferEngine
    let hub: NotificationHub
    /// Questions to interceptors, waiting for their answers.
    let questions: ServerQuestions
    let coalescer: WriteCoalescer
    let requestSettings: RequestSettings
    /// The principals, by name, uid and token (`PrincipalTable.swift`).
    let principalTable: PrincipalTable
    /// Every principal, by name: the configured ones and, unless one of them has the
    /// server's uid, "local", the Unix socket owner's.
    var principals: [String: Principal] { principalTable.byName }
    /// Failed `auth` attempts since start, and what connections that never authenticated
    /// sent and received, for an admin's `server.stats`.
    var authFailures: UInt64 = 0
    /// Wrong tokens per source and in all (`auth` and the operations listener's bearer
    /// tokens): past its budget a token is refused without being compared.
    lazy var authThrottle = AuthThrottle(budget: .init(perSource: config.authFailuresPerSource,
                                                       total: config.authFailuresTotal))
    var anonymousUsage = Principal.Usage()
    /// Loads and saves the principals' persistent cookies (`--state-dir`).
    let cookies: CookiePersistence
    /// Loads and saves the principals' stored credentials (`--state-dir`).
    let credentials: CredentialPersistence
    /// Expires unused requests and keeps detached ones (`detach`, `attach`). Lazy only
    /// because it refers back to the server; its timer is made in `init`.
    private(set) lazy var lifetime = ObjectLifetime(server: self, timer: sweepTimer, config: config)
    private let sweepTimer: EventLoop.Timer
    /// The fetches of connections that closed, released a batch per turn
    /// (`releaseGoneFetchBatch`), and the timer that runs the next batch.
    private var goneFetches = TurnQueue<HTTPRequest>()
    private let goneFetchTimer: EventLoop.Timer
    let startedAt = Date()
    /// `server.info`'s last `uptimeSeconds`, encoded (`ServerMethods.swift`).
    var lastUptime: (seconds: Double, json: EncodedJSON)?
    /// Raw sockets' TLS client context (`socketTLSContext`), made on first use.
    private var socketTLS: TLSContext?

    var listeners: [(address: ListenAddress, listener: Listener)] = []
    var connections: [UInt64: RPCConnection] = [:]
    /// Connections answered with a refusal and closing once it is out (a TLS one after
    /// its handshake): a shutdown closes them at once rather than wait for them.
    var refused: [UInt64: RPCConnection] = [:]
    var nextConnectionID: UInt64 = 1
    public internal(set) var totalConnections: UInt64 = 0

    /// Where a graceful stop stands (`Server+Shutdown.swift`).
    var shutdownMachine = ShutdownMachine()
    var shutdownDone: (() -> Void)?
    var drainDeadline: EventLoop.Timer?
    var drainCheckScheduled = false
    var closeDeadline: EventLoop.Timer?

    /// What `GET /metrics` shows (`Operations/ServerMetrics.swift`).
    let metrics = ServerMetrics()
    /// The operations listener (`--http-listen`), its clients, and the timer that
    /// measures the loop's lag while it runs (`Server+Operations.swift`).
    var operationsListener: Listener?
    var operationsConnections: [UInt64: OperationsConnection] = [:]
    var loopLagTimer: EventLoop.Timer?
    /// The operations listener's address as bound (a port 0 becomes the chosen one).
    public internal(set) var operationsAddress: ListenAddress?

    public init(config: ServerConfig, loop: Loop, logger: Logger) throws {
        self.config = config
        self.loop = loop
        self.logger = logger
        var access = Logger(label: "xhrpc.access")
        access.logLevel = logger.logLevel
        accessLog = access
        dispatcher = Dispatcher(registry: registry)
        var engineOptions = config.engine
        if engineOptions.userAgent.isEmpty { engineOptions.userAgent = "xhrpc/\(Server.version)" }
        engine = try TransferEngine(loop: loop, options: engineOptions)
        hub = try NotificationHub(loop: loop)
        questions = ServerQuestions(loop: loop, logger: logger)
        coalescer = try WriteCoalescer(loop: loop)
        requestSettings = RequestSettings(maxBufferBytes: config.maxBufferBytes, maxRedirects: config.maxRedirects,
                                          maxResponseBytes: config.maxResponseBytes)
        principalTable = try PrincipalTable(config)
        if let dir = config.stateDir {
            // Before any store is read: what a save killed halfway left is garbage.
            for name in try StateDirectory(dir).removeLeftoverTemporaries() {
                logger.notice("removed \(dir)/\(name), left by a save that did not finish")
            }
        }
        cookies = try CookiePersistence(stateDirectory: config.stateDir, loop: loop, logger: logger)
        credentials = try CredentialPersistence(stateDirectory: config.stateDir, logger: logger)
        for p in principalTable.byName.values.sorted(by: { $0.name < $1.name }) { credentials.attach(p) }
        for p in principalTable.byName.values.sorted(by: { $0.name < $1.name }) { cookies.attach(p) }
        sweepTimer = try EventLoop.Timer(loop: loop)
        goneFetchTimer = try EventLoop.Timer(loop: loop)
        dispatcher.gate = { [unowned self] call in try admit(call) }
        dispatcher.onError = { [unowned self] peer, error in count(error, from: peer) }
        dispatcher.onAnswer = { [unowned self] call, error in callAnswered(call, error) }
        dispatcher.onResponse = { [unowned self] peer, id, response in questions.answered(by: peer, id: id, response) }
        registerMethods()
    }

    /// Every method the server offers, declared once (api/openrpc.json lists the same).
    private func registerMethods() {
        registerServerMethods()
        registerAuthMethods()
        registerRequestMethods()
        registerTransferMethods()
        registerTLSMethods()
        registerProxyMethods()
        registerSubscriptionMethods()
        registerFetch()
        registerDetachMethods()
        registerSocketMethods()
        registerInterceptMethods()
        registerCredentialMethods()
    }

    /// The declared methods and their parameter names, for the contract test.
    public var methodParameterNames: [String: [String]] { registry.parameterNames }

    public var connectionCount: Int { connections.count }

    /// A connection ended: its requests are aborted and released, its subscriptions end.
    func connectionClosed(_ c: RPCConnection) {
        connections[c.id] = nil
        metrics.connectionClosed(id: c.id)
        let context = c.context
        c.context = nil
        if let pending = context as? PendingAuthentication { endPending(pending, of: c) }
        if let session = context as? ClientSession { end(session) }
        logger.debug("connection \(c.id) closed")
        // Every connection counts for a stop, authenticated or not.
        drainMayHaveEnded()
        perform(shutdownMachine.connectionClosed(remaining: connections.count))
    }

    /// A client session ended with its connection: its subscriptions end, and the
    /// objects it created (and did not detach) are released. Its fetches are released
    /// over the next turns (`releaseGoneFetchBatch`).
    private func end(_ session: ClientSession) {
        session.end()
        questions.connectionClosed(session.connection)
        if session.principal.interceptor?.session === session { session.principal.interceptor = nil }
        for id in session.subscriptionIDs { session.principal.subscriptions[id] = nil }
        for handle in session.createdObjects {
            if let o = session.principal.objects[handle] { release(o) }
        }
        for r in session.fetches.values { goneFetches.append(r) }
        session.fetches = [:]
        if !goneFetches.isEmpty, !goneFetchTimer.isActive { goneFetchTimer.start(timeout: 0, releaseGoneFetchBatch) }
    }

    /// Fetches of closed connections released per turn. Releasing one aborts its
    /// transfer and answers its call (to nobody), about 5 µs; a client that went with
    /// 625 fetches in flight held the loop for 3 ms when they were all released at once,
    /// and one with 10,000 would hold it for 50.
    static let goneFetchesPerTurn = 64

    /// Releases the next `goneFetchesPerTurn` fetches of closed connections, and arms
    /// the timer for the rest a millisecond later (not sooner: libuv 1.44 would run a
    /// timer restarted from its own callback with no delay in the same pass), so that
    /// the loop polls in between. Until its turn comes a fetch runs on, answering no
    /// one: the principal's counts (its `transfers` limit, a drain's wait) include it,
    /// and a stop releases what is left at once (`releaseAllGoneFetches`).
    private lazy var releaseGoneFetchBatch: () -> Void = { [unowned self] in
        releaseGoneFetches(atMost: Server.goneFetchesPerTurn)
        if !goneFetches.isEmpty { goneFetchTimer.start(timeout: 1, releaseGoneFetchBatch) }
        drainMayHaveEnded()
    }

    /// A stop's end: every fetch of a closed connection is released now, and the timer
    /// closes.
    func releaseAllGoneFetches() {
        releaseGoneFetches(atMost: .max)
        goneFetchTimer.close()
    }

    private func releaseGoneFetches(atMost count: Int) {
        var released = 0
        while released < count, let r = goneFetches.popFirst() {
            r.release()
            released += 1
        }
    }

    /// Ends an object of any kind and takes it out of the tables.
    func release(_ o: any SessionObject) {
        o.release()
        hub.forget(o)
        o.principal.remove(o.handle)
        o.creator?.createdObjects.remove(o.handle)
        drainMayHaveEnded()
    }

    /// Refuses to start a transfer once a stop has begun: the drain waits for the
    /// transfers in flight, and new ones would keep it going.
    func checkAcceptingTransfers() throws(RPCError) {
        guard shutdownMachine.acceptsTransfers else { throw ServiceError.shuttingDown }
    }

    /// Runs `body` on the next turn of the loop, outside whatever callback we are in.
    func soon(_ body: @escaping () -> Void) {
        guard let t = try? EventLoop.Timer(loop: loop) else { return }
        t.start(timeout: 0) {
            t.close()
            body()
        }
    }
}

/// What objects see of the server (`ObjectEnvironment`).
extension Server: ObjectEnvironment {
    var clock: ServerClock { config.clock }
    var egressPolicy: EgressPolicy? { config.engine.egressPolicy }

    func socketTLSContext() throws -> TLSContext {
        if let made = socketTLS { return made }
        let made = try TLSContext.client(caFile: config.engine.caFile, tls13Only: config.engine.tlsMin == .v1_3)
        socketTLS = made
        return made
    }
    var egressProxy: ProxySettings? { config.egressProxy }
    var secretQueryNames: Set<String> { config.engine.secretQueryNames }
    func cookiesMayHaveChanged(for principal: Principal) { cookies.jarMayHaveChanged(principal) }
    func objectMayHaveSettled() { drainMayHaveEnded() }
    func log(_ message: String) { logger.notice("\(message)") }

    /// The access log: one line per finished request at info level, under the label
    /// `xhrpc.access`, with its figures as metadata (JSON keys with `--log-format json`);
    /// and the request metrics (a socket's close is logged, not counted as a request).
    func finished(_ entry: @autoclosure () -> AccessLogEntry) {
        let e = entry()
        if let outcome = e.outcome {
            metrics.requestFinished(outcome: outcome, bytesIn: e.bytesIn, bytesOut: e.bytesOut, durationMs: e.durationMs)
        }
        guard accessLog.logLevel <= .info else { return }
        var meta: Logger.Metadata = [
            "principal": .string(e.principal), "method": .string(e.method), "url": .string(e.url),
            "status": .stringConvertible(e.status), "bytesIn": .stringConvertible(e.bytesIn),
            "bytesOut": .stringConvertible(e.bytesOut), "durationMs": .stringConvertible(e.durationMs),
            "attempts": .stringConvertible(e.attempts),
        ]
        if let reason = e.reason { meta["reason"] = .string(reason) }
        if e.truncated { meta["truncated"] = "true" }
        accessLog.info("\(e.event)", metadata: meta)
    }
}


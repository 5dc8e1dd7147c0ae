import EventLoop
import HTTPEngine
import SecureStream

/// Everything an object needs from the server, and no more: objects hold this, never
/// the `Server`, so what an object can reach is written here, and an object can be
/// tested with an environment made for the test (`ObjectEnvironmentTests`).
protocol ObjectEnvironment: AnyObject {
    /// Runs HTTP transfers.
    var engine: TransferEngine { get }
    /// The loop raw sockets run on.
    var loop: Loop { get }
    /// Where objects may connect (`EgressPolicy`); nil checks nothing.
    var egressPolicy: EgressPolicy? { get }
    /// The TLS client settings of raw sockets: the server's CA file and `--tls-min`,
    /// made on first use. Throws when the CA file cannot be loaded.
    func socketTLSContext() throws -> TLSContext
    /// Delivers the objects' notifications.
    var hub: NotificationHub { get }
    /// The server-wide settings every request inherits.
    var requestSettings: RequestSettings { get }
    /// The clock expiry is measured with.
    var clock: ServerClock { get }
    /// The server's egress proxy, for principals that asked for secure communication.
    var egressProxy: ProxySettings? { get }
    /// The query parameters whose values a shown URL hides (`URLRedaction`).
    var secretQueryNames: Set<String> { get }
    /// A transfer that used `principal`'s cookie jar ended: the jar may need saving.
    func cookiesMayHaveChanged(for principal: Principal)
    /// An object ended a transfer or emptied its buffer: a graceful stop may be over.
    func objectMayHaveSettled()
    /// An object finished its work (a request reached DONE): one line of the access log,
    /// and the requests metric (which needs the entry's outcome and byte counts).
    func finished(_ entry: @autoclosure () -> AccessLogEntry)
    /// Questions to clients (an interceptor's), answered later or not at all.
    var questions: ServerQuestions { get }
    /// Writes a notice to the server's log (a decision worth an operator's attention).
    func log(_ message: String)
    /// Runs `body` on the next turn of the loop, outside the callback it is called from.
    func soon(_ body: @escaping () -> Void)
}

import JSON
import JSONRPC

/// What every kind of object a client creates in the server — an HTTP request today, a
/// raw socket or a file transfer tomorrow — is to the rest of the server. The pieces
/// that are the same for every kind work through this seam and nowhere else:
/// - the principal's one table of objects, by handle (`Principal.objects`), which also
///   makes another principal's handle read as `unknown_handle`;
/// - expiry and `detach`/`attach` (`ObjectLifetime`);
/// - subscriptions and notifications (`NotificationHub`, `Subscription`);
/// - `list`, and release when the connection that created it closes (`Server`).
/// A kind adds its own state machine, methods and notifications; see
/// docs/internals/ARCHITECTURE.md, "A new kind of object".
///
/// Objects are confined to the loop's thread, and see the server only through their
/// `ObjectEnvironment`.
protocol SessionObject: AnyObject {
    /// The kind's name, as `list` shows it and errors say it ("request").
    static var kind: String { get }
    /// The name the client gave or the server generated; unique among the principal's
    /// objects of every kind.
    var handle: String { get }
    var principal: Principal { get }
    /// The connection that created it: the object ends when that connection closes,
    /// unless it was detached.
    var creator: ClientSession? { get set }
    /// The connection that hears its events besides its subscribers (nil: none).
    var opener: ClientSession? { get set }
    /// When a call last named it or it last changed state, on the server's clock.
    var lastUsed: Double { get }
    /// Restarts the idle time that expires it.
    func touch()
    /// Whether expiry may release it now: false while it is busy (a transfer in flight).
    var isIdle: Bool { get }
    /// Ends it for good: stops what it runs, frees what it holds, answers a call that
    /// waits on it. The table entry is removed by the caller (`Server.release`).
    func release()
    /// Its entry in `list`, with nothing secret in it.
    var listEntry: JSONValue { get }
}

extension SessionObject {
    var kind: String { Self.kind }
}

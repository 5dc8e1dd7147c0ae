import HTTPEngine
import JSONRPC

/// Who is calling. Everything a client creates belongs to its principal, and a
/// principal sees only its own: another principal's handle reads as `unknown_handle`.
/// Until tokens exist (a later capability) every connection is the one local principal.
final class Principal {
    let name: String
    private(set) var requests: [String: HTTPRequest] = [:]
    /// Subscriptions made by this principal's connections, by id.
    var subscriptions: [String: Subscription] = [:]
    /// Whether this principal's requests go through the server's egress proxy
    /// (`enableSecureCommunication`); off until it asks. A request's own
    /// `enableHttpProxy` wins. Kept here, not on the connection, so that every
    /// connection of the principal sees the same routing and another principal none of it.
    var secureCommunication = false
    /// The cookies of all this principal's requests (unless a request disables cookie
    /// handling), and of no one else's. It lives as long as the principal; `CookiePersistence`
    /// loads and saves its persistent part.
    let cookieJar: CookieJar

    /// Throws when libcurl cannot make the cookie jar (out of memory).
    init(name: String) throws {
        self.name = name
        cookieJar = try CookieJar()
    }

    func request(_ handle: String) throws(RPCError) -> HTTPRequest {
        guard let r = requests[handle] else {
            throw .app(.unknownHandle, "No request '\(handle)'; create it first", ["request": .string(handle)])
        }
        return r
    }

    func add(_ r: HTTPRequest) { requests[r.handle] = r }

    func remove(_ handle: String) { requests[handle] = nil }
}

/// The service's state for one connection: its principal, the requests it created
/// (released when it closes) and the subscriptions it holds.
final class ClientSession {
    unowned let connection: RPCConnection
    let principal: Principal
    var createdRequests: Set<String> = []
    var subscriptionIDs: Set<String> = []
    /// `fetch` calls under way: their request objects live here (they are in no table)
    /// until they are answered, or until the connection closes.
    var fetches: [ObjectIdentifier: HTTPRequest] = [:]

    init(connection: RPCConnection, principal: Principal) {
        self.connection = connection
        self.principal = principal
    }
}

/// Events a subscription can ask for.
enum EventKind: String, CaseIterable {
    case stateChange, progress
}

/// A subscription: one request of the principal, or all of them (present and future),
/// for some events, delivered to the connection that made it.
final class Subscription {
    let id: String
    weak var session: ClientSession?
    /// nil: every request of the principal.
    let request: String?
    let events: Set<EventKind>

    init(id: String, session: ClientSession, request: String?, events: Set<EventKind>) {
        self.id = id
        self.session = session
        self.request = request
        self.events = events
    }
}

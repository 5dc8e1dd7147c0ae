/// The ready states of a request object, numbered as XMLHttpRequest numbers them
/// (docs/guide/requests.md). Every response and notification that reports a state gives both the
/// number and the name.
public enum RequestState: Int, Sendable, CaseIterable {
    case unsent = 0, opened, sent, headersReceived, loading, done

    public var name: String {
        switch self {
        case .unsent: "UNSENT"
        case .opened: "OPENED"
        case .sent: "SENT"
        case .headersReceived: "HEADERS_RECEIVED"
        case .loading: "LOADING"
        case .done: "DONE"
        }
    }

    /// SENT, HEADERS_RECEIVED and LOADING: a transfer is under way.
    public var isInFlight: Bool { self == .sent || self == .headersReceived || self == .loading }
}

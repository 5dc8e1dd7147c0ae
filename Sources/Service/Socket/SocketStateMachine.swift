/// The states of a raw socket, numbered as docs/internals/SOCKETS.md ("States") and
/// api/openrpc.json list them.
enum SocketState: Int, CaseIterable, ObjectState {
    case prepared = 0, connecting, open, disconnecting, disconnected

    static var objectKind: String { RawSocket.kind }

    var name: String {
        switch self {
        case .prepared: "Prepared"
        case .connecting: "Connecting"
        case .open: "Open"
        case .disconnecting: "Disconnecting"
        case .disconnected: "Disconnected"
        }
    }

    /// Connecting, Open or Disconnecting: a stream exists or is being made.
    var isLive: Bool { self == .connecting || self == .open || self == .disconnecting }
}

/// The raw socket's state table (docs/internals/SOCKETS.md), with no I/O: which call is allowed in which state and where
/// each event leads. `RawSocket` asks it before acting, so the table lives in one place
/// and is tested on its own (`SocketStateMachineTests`).
///
/// | state         | calls allowed                                   | events                      |
/// |---------------|-------------------------------------------------|-----------------------------|
/// | Prepared      | connect, disable…Verification                   | none                        |
/// | Connecting    | disconnect (cancels)                            | onOpen → Open; onErr, onClose → Disconnected |
/// | Open          | write, disconnect → Disconnecting               | onRead; onErr; onClose → Disconnected |
/// | Disconnecting | —                                               | onRead; onErr; onClose → Disconnected |
/// | Disconnected  | connect, disable…Verification                   | none                        |
///
/// `read`, `getState` and `release` are allowed in every state.
struct SocketStateMachine {
    /// A call the current state does not allow; says which states do.
    struct Misuse: Error, Equatable {
        let allowed: String
    }

    private(set) var state: SocketState = .prepared

    /// Whether the TLS switches may change: only before a stream is made.
    var acceptsOptions: Bool { state == .prepared || state == .disconnected }

    mutating func connect() throws(Misuse) {
        guard acceptsOptions else { throw Misuse(allowed: "Prepared or Disconnected") }
        state = .connecting
    }

    func checkWrite() throws(Misuse) {
        guard state == .open else { throw Misuse(allowed: "Open") }
    }

    /// The stream is made: Connecting → Open. False (and no change) in any other state,
    /// where the stream is not wanted any more.
    mutating func opened() -> Bool {
        guard state == .connecting else { return false }
        state = .open
        return true
    }

    /// What a `disconnect` call does.
    enum DisconnectAction: Equatable {
        /// Connecting: give up making the stream; the socket closes now.
        case cancelConnect
        /// Open: send what is queued, then close (now Disconnecting).
        case flushThenClose
    }

    mutating func disconnect() throws(Misuse) -> DisconnectAction {
        switch state {
        case .connecting:
            return .cancelConnect
        case .open:
            state = .disconnecting
            return .flushThenClose
        default:
            throw Misuse(allowed: "Connecting or Open")
        }
    }

    /// The stream ended or was never made, for whatever reason. Returns whether
    /// `onClose` is owed: it is once per stream, when the socket was live.
    mutating func closed() -> Bool {
        guard state.isLive else { return false }
        state = .disconnected
        return true
    }
}

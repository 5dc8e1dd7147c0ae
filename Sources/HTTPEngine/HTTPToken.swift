/// RFC 9110 §5.6.2's token, what methods, header names and authentication schemes are
/// made of: letters, digits and ``!#$%&'*+-.^_`|~``. The one place that says which
/// bytes, for the request the engine sends, the response heads it reads and the
/// Service's checks of what clients give. (The WebSocket module reads its upgrade
/// requests without this module, and keeps its own.)
public enum HTTPToken {
    @inlinable
    public static func isTokenByte(_ b: UInt8) -> Bool {
        switch b {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: true
        case 0x21, 0x23, 0x24, 0x25, 0x26, 0x27, 0x2A, 0x2B, 0x2D, 0x2E, 0x5E, 0x5F, 0x60, 0x7C, 0x7E: true
        default: false
        }
    }

    /// A whole token: not empty, every byte a token byte.
    public static func isToken(_ s: String) -> Bool {
        !s.isEmpty && s.utf8.allSatisfy(isTokenByte)
    }
}

import CUV

/// A libuv failure: the negative code libuv returned, its symbolic name (`EADDRINUSE`)
/// and its description, plus what we were doing when it happened.
public struct UVError: Error, CustomStringConvertible, Equatable, Sendable {
    public let code: Int32
    public let operation: String

    public init(_ code: Int32, _ operation: String) {
        self.code = code
        self.operation = operation
    }

    public var name: String { String(cString: uv_err_name(code)) }
    public var message: String { String(cString: uv_strerror(code)) }
    public var description: String { "\(operation): \(message) (\(name))" }

    /// Throws when a libuv call returned a negative code.
    @inlinable
    public static func check(_ code: Int32, _ operation: @autoclosure () -> String) throws {
        if code < 0 { throw UVError(code, operation()) }
    }
}

/// libuv's error codes as the plain negative `Int32`s its functions return, for the few
/// this module produces or tests for itself. (`uv_errno_t` imports as a struct; spelling
/// `.rawValue` at every use would hide the intent.)
enum UVErrorCode {
    static let eof = UV_EOF.rawValue
    static let einval = UV_EINVAL.rawValue
    static let ebadf = UV_EBADF.rawValue
    static let ecanceled = UV_ECANCELED.rawValue
    static let enotconn = UV_ENOTCONN.rawValue
}

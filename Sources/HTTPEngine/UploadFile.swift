#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A file opened for sending by whoever decided it may be sent: the Service layer opens
/// it confined to the principal's upload root (`ConfinedPath`), and the engine only
/// reads the descriptor, never a path, so nothing can be swapped in between the check
/// and the read. Every attempt of the request (a retry, an auth round, a 307) reads the
/// same file from its start with `pread`, which moves no shared offset. The descriptor
/// is closed when the last body holding it is dropped (the request is released or
/// opened again).
public final class UploadFile: Sendable {
    /// Open for reading; owned by this object.
    public let descriptor: Int32
    /// How messages name the file (the client's path).
    public let name: String

    /// Takes ownership of `descriptor`.
    public init(descriptor: Int32, name: String) {
        self.descriptor = descriptor
        self.name = name
    }

    deinit { close(descriptor) }
}

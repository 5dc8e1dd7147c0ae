import JSON

/// One declared parameter of a method. The declaration is the single source of the
/// method's parameter list: the dispatcher validates calls with it, positional calls are
/// mapped through it, and a test checks it against `api/openrpc.json`.
public struct ParamSpec: Equatable, Sendable {
    public let name: String
    public let required: Bool

    public init(_ name: String, required: Bool) {
        self.name = name
        self.required = required
    }
}

/// What a method accepts: declared names (checked: missing required or unknown names are
/// -32602), or anything (the handler reads `RPCCall.rawParams` itself).
public enum ParamSchema: Sendable {
    case named([ParamSpec])
    case any
}

/// What a handler did with a call: answered it at once (with its result, or through the
/// call itself), or kept the `RPCCall` to answer later through `reply`/`fail` (a
/// synchronous `send` waiting for its transfer).
public enum RPCOutcome {
    case result(JSONValue)
    case deferred
    /// The handler has answered already, through `reply`/`fail` (`reply(object:)`).
    case answered
}

/// A method handler. It runs on the loop thread; throwing an `RPCError` answers with
/// that error, any other error becomes -32603.
public typealias RPCHandler = (RPCCall) throws -> RPCOutcome

/// A method: its name, its parameters and its handler. A class, so that every call
/// that refers to it (`RPCCall.registered`) holds one reference, not copies of its fields.
public final class RPCMethod {
    public let name: String
    public let schema: ParamSchema
    public let handler: RPCHandler
    /// Its place in the order of declaration (0, 1, …): an index for per-method tables
    /// (metrics) that saves hashing the name on every call.
    public let number: Int

    init(name: String, schema: ParamSchema, handler: @escaping RPCHandler, number: Int) {
        self.name = name
        self.schema = schema
        self.handler = handler
        self.number = number
    }
}

/// The table of methods a server offers. Each method is declared once, here.
public final class MethodRegistry {
    public private(set) var methods: [String: RPCMethod] = [:]

    public init() {}

    /// Declares a method. `params` lists names in positional order; a name ending in `?`
    /// is optional (`["request", "timeout?"]`). Declaring a name twice is a programming
    /// error.
    public func register(_ name: String, params: [String], _ handler: @escaping RPCHandler) {
        let specs = params.map { p in
            p.hasSuffix("?") ? ParamSpec(String(p.dropLast()), required: false) : ParamSpec(p, required: true)
        }
        add(RPCMethod(name: name, schema: .named(specs), handler: handler, number: methods.count))
    }

    /// Declares a method that takes any parameters (the specification's `sum [1, 2, 4]`).
    public func registerAnyParams(_ name: String, _ handler: @escaping RPCHandler) {
        add(RPCMethod(name: name, schema: .any, handler: handler, number: methods.count))
    }

    private func add(_ m: RPCMethod) {
        precondition(methods[m.name] == nil, "method \(m.name) declared twice")
        methods[m.name] = m
        lastFound = nil
    }

    /// The method last looked up by `method(named:)`: a client that calls one method
    /// over and over (a probe, a pipeline of `fetch`) has it found by comparing its
    /// name, without hashing it (some 500 instructions of a call).
    private var lastFound: RPCMethod?

    /// The declared method of that name, or nil.
    public func method(named name: String) -> RPCMethod? {
        if let last = lastFound, last.name == name { return last }
        guard let found = methods[name] else { return nil }
        lastFound = found
        return found
    }

    /// The declared parameter names of each method, for the contract test.
    public var parameterNames: [String: [String]] {
        methods.mapValues { m in
            if case .named(let specs) = m.schema { return specs.map(\.name) }
            return []
        }
    }
}

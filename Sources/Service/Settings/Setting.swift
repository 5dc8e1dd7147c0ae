import JSON

/// The JSON type a config key holds. A key of another type refuses the start, naming
/// the key, this type and the value given (`ConfigFile.load` in xhrpcd).
public enum SettingType: String, Sendable, CaseIterable {
    case integer = "an integer"
    case number = "a number"
    case string = "a string"
    case boolean = "true or false"
    case strings = "an array of strings"
    case object = "an object"
    case objects = "an array of objects"

    /// Whether `value` is of this type. An integer may be written `1000.0`, not `1000.5`
    /// and not `"1000"`.
    public func admits(_ value: JSONValue) -> Bool {
        switch self {
        case .integer: return value.int64Value != nil
        case .number: return value.doubleValue != nil
        case .string: return value.stringValue != nil
        case .boolean: return value.boolValue != nil
        case .strings: return value.arrayValue?.allSatisfy { $0.stringValue != nil } == true
        case .object: return value.objectValue != nil
        case .objects: return value.arrayValue?.allSatisfy { $0.objectValue != nil } == true
        }
    }
}

/// The range a numeric setting must fall in: above zero (or zero too), and at most
/// `max` where there is one. One value says it for the check, the message and the page.
public struct SettingBounds: Sendable, Equatable {
    public var allowsZero: Bool
    public var max: Double?
    /// How `max` reads in a message ("a year", "86400 seconds (a day)").
    public var maxText: String?
    /// The unit a message names ("seconds"), if the number has one.
    public var unit: String?

    public static let positive = SettingBounds(allowsZero: false)
    public static let nonNegative = SettingBounds(allowsZero: true)
    /// A duration in seconds: finite, and under a year, so that it fits the loop's
    /// millisecond timers with room to spare.
    public static func seconds(allowsZero: Bool = false, max: Double = 365 * 86400, maxText: String = "a year") -> SettingBounds {
        SettingBounds(allowsZero: allowsZero, max: max, maxText: maxText, unit: "seconds")
    }

    public init(allowsZero: Bool, max: Double? = nil, maxText: String? = nil, unit: String? = nil) {
        self.allowsZero = allowsZero
        self.max = max
        self.maxText = maxText
        self.unit = unit
    }

    public func contains(_ v: Double) -> Bool {
        v.isFinite && (v > 0 || (allowsZero && v == 0)) && (max.map { v <= $0 } ?? true)
    }

    /// "a positive number of seconds, at most a year".
    public var description: String {
        var text = "a \(allowsZero ? "non-negative" : "positive") number"
        if let unit { text += " of \(unit)" }
        if let maxText { text += ", at most \(maxText)" } else if let max { text += ", at most \(Int(max))" }
        return text
    }
}

/// A type a setting's value may have, read from its config key.
public protocol SettingValue: Sendable {
    static var settingType: SettingType { get }
    /// The value of a config key already checked to be of `settingType`.
    init?(setting json: JSONValue)
    /// The value as the reference page and `--help` show it.
    var settingText: String { get }
    /// The number that `SettingBounds` checks; nil for what is not a number.
    var boundedNumber: Double? { get }
}

extension SettingValue {
    public var boundedNumber: Double? { nil }
}

extension Int: SettingValue {
    public static var settingType: SettingType { .integer }
    public init?(setting json: JSONValue) {
        guard let n = json.int64Value.flatMap({ Int(exactly: $0) }) else { return nil }
        self = n
    }
    /// A count of bytes that is a whole number of MiB says so too: "16777216 (16 MiB)".
    public var settingText: String { self >= 1 << 20 && self % (1 << 20) == 0 ? "\(self) (\(self >> 20) MiB)" : String(self) }
    public var boundedNumber: Double? { Double(self) }
}

extension Double: SettingValue {
    public static var settingType: SettingType { .number }
    public init?(setting json: JSONValue) {
        guard let d = json.doubleValue else { return nil }
        self = d
    }
    public var settingText: String { rounded() == self && abs(self) < 1e15 ? String(Int(self)) : String(self) }
    public var boundedNumber: Double? { self }
}

extension String: SettingValue {
    public static var settingType: SettingType { .string }
    public init?(setting json: JSONValue) {
        guard let s = json.stringValue else { return nil }
        self = s
    }
    public var settingText: String { self }
}

extension Bool: SettingValue {
    public static var settingType: SettingType { .boolean }
    public init?(setting json: JSONValue) {
        guard let b = json.boolValue else { return nil }
        self = b
    }
    public var settingText: String { self ? "on" : "off" }
}

extension Array: SettingValue where Element == String {
    public static var settingType: SettingType { .strings }
    public init?(setting json: JSONValue) {
        guard let items = json.arrayValue else { return nil }
        var strings: [String] = []
        for item in items {
            guard let s = item.stringValue else { return nil }
            strings.append(s)
        }
        self = strings
    }
    public var settingText: String { isEmpty ? "none" : joined(separator: ", ") }
}

/// A setting whose config key holds an object (`limits`) or an array of objects
/// (`principals`): the table types and documents it; its reader is its own.
public struct StructuredSetting: SettingValue, Equatable {
    public static var settingType: SettingType { .object }
    public let json: JSONValue
    public init?(setting json: JSONValue) { self.json = json }
    public var settingText: String { JSON.encodeString(json) }
}

/// One setting: its flag, its config key, the type of its value, its default and the
/// text that documents it. `Settings` holds them all; the command line's options take
/// their name and help from here, the config file is read and type-checked by it,
/// `ServerConfig`'s defaults are its `defaultValue`s, and docs/reference/settings.md is
/// written from it (`xhrpcd --print-settings-reference`). So a default lives in one place.
public struct Setting<Value: SettingValue>: Sendable {
    /// The long flag without its dashes ("max-message-bytes"); nil: config file only.
    public let flag: String?
    /// The config file's key ("maxMessageBytes"); nil: command line only.
    public let key: String?
    /// The placeholder `--help` shows for the flag's value ("n", "seconds"); nil for a
    /// flag that takes none (`--insecure-tcp`).
    public let valueName: String?
    /// What the flag or key does, in whole sentences; the default and the config key are
    /// added by `help` and by the reference page, not written here.
    public let summary: String
    /// The value used when neither the command line nor the file gives one.
    public let defaultValue: Value?
    /// What leaving it out means ("none: download is refused"), or what the default
    /// means ("TCP needs principals with tokens") where it has one.
    public let note: String?
    public let bounds: SettingBounds?
    /// The JSON type of the config key, where it is not `Value`'s (the repeatable
    /// `--limit NAME=N` reads an object from the file).
    public let keyType: SettingType
    /// Whether the flag may be given more than once (its values form a list).
    public let repeatable: Bool
    /// A page of docs/ that tells more, relative to docs/reference/ ("../security/egress.md").
    public let see: String?

    public init(flag: String?, key: String?, valueName: String?, default defaultValue: Value? = nil, note: String? = nil,
                bounds: SettingBounds? = nil, keyType: SettingType? = nil, repeatable: Bool = false, see: String? = nil,
                _ summary: String) {
        self.flag = flag
        self.key = key
        self.valueName = valueName
        self.summary = summary
        self.defaultValue = defaultValue
        self.note = note
        self.bounds = bounds
        self.keyType = keyType ?? Value.settingType
        self.repeatable = repeatable || Value.settingType == .strings
        self.see = see
    }

    /// The default, for a setting that has one (`ServerConfig` reads it). A setting of
    /// the table without one asked for here is a broken table, which SettingsTableTests catch.
    public var fallback: Value {
        guard let defaultValue else { preconditionFailure("the setting \(key ?? flag ?? "?") has no default") }
        return defaultValue
    }

    /// The type-erased row the reference page and the checks read.
    public var descriptor: SettingDescriptor {
        SettingDescriptor(flag: flag, key: key, valueName: valueName, type: keyType, repeatable: repeatable,
                          defaultText: defaultValue.map(\.settingText), note: note, bounds: bounds, summary: summary, see: see,
                          defaultInBounds: defaultValue.flatMap(\.boundedNumber).map { n in bounds?.contains(n) ?? true } ?? true)
    }

    /// The text of `--help`: the summary, then the config key and the default.
    public var help: String { descriptor.help }

    /// A message naming where a bad value came from: the flag, or the config key.
    func refusal(_ what: String, fromFile: Bool) -> String {
        fromFile ? "the config key '\(key ?? "")' \(what)" : "--\(flag ?? "") \(what)"
    }

    /// The flag's value, else the file's, else nil, checked against `bounds`.
    public func resolve(flag given: Value?, file: JSONObject) throws(SettingError) -> Value? {
        let fromFile = given == nil
        guard let value = given ?? key.flatMap({ file[$0] }).flatMap(Value.init(setting:)) else { return nil }
        if let bounds, let n = value.boundedNumber, !bounds.contains(n) {
            throw SettingError(refusal("must be \(bounds.description)", fromFile: fromFile)
                + (fromFile ? "; found \(value.settingText)" : ""))
        }
        return value
    }
}

/// A setting's value refused: the message names the flag or the key.
public struct SettingError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// One row of the settings table, whatever its value's type.
public struct SettingDescriptor: Sendable {
    public let flag: String?
    public let key: String?
    public let valueName: String?
    public let type: SettingType
    public let repeatable: Bool
    public let defaultText: String?
    public let note: String?
    public let bounds: SettingBounds?
    public let summary: String
    public let see: String?
    /// Whether the default (if a number) is inside `bounds`: SettingsTests check it.
    public let defaultInBounds: Bool

    /// "(repeatable; config key "listen", an array of strings; default 10)".
    public var help: String {
        var notes: [String] = []
        if repeatable, flag != nil { notes.append("repeatable") }
        if let key { notes.append("config key \"\(key)\", \(type.rawValue)") } else { notes.append("command line only") }
        if let defaultText { notes.append("default \(defaultText)") } else if let note { notes.append("default \(note)") }
        return "\(summary) (\(notes.joined(separator: "; ")))."
    }

    /// What the default column of the reference page says.
    public var defaultColumn: String {
        if let defaultText { return "`\(defaultText)`" + (note.map { ": \($0)" } ?? "") }
        return note ?? "none"
    }
}

//! The `telephony` service: text messages and calls, to allowed numbers.

use super::*;

actions!(
    /// `telephony` actions.
    TelephonyAction {
        /// Write a text message.
        SmsSend = "sms_send" {
            /// The recipient's number.
            number: String,
            /// The message.
            text: String,
        },
        /// Call a number.
        Dial = "dial" {
            /// The number to call.
            number: String,
        },
    }
);

pub(super) fn spec() -> ServiceSpec {
    ServiceSpec {
        node_type: "telephony",
        id: "telephony",
        description: "Text messages and phone calls, to the numbers the daemon allows. Off unless enabled in the daemon's configuration.",
        actions: vec![
            action(
                "sms_send",
                Risk::High,
                true,
                "Open the phone's messaging app with a text message to an allowed number, ready to send (Android lets no shell command send it silently).",
            )
            .param("number", true, phone_number_param())
            .param("text", true, text_param("the message", 1600))
            .returns(vec![
                req("number", Schema::string("")),
                req("status", Schema::string("composed: the message waits in the messaging app")),
            ])
            .example(json!({"number": "+4915112345678", "text": "On my way"})),
            action(
                "dial",
                Risk::High,
                true,
                "Call an allowed number at once.",
            )
            .param("number", true, phone_number_param())
            .returns(vec![
                req("number", Schema::string("")),
                req("calling", Schema::boolean("")),
            ])
            .example(json!({"number": "+4915112345678"})),
        ],
        state: None,
        home_assistant: Vec::new(),
        companion_event: None,
    }
}

fn phone_number_param() -> Schema {
    Schema::pattern(
        "phone number: digits with an optional leading +, e.g. +4915112345678",
        PHONE_NUMBER_PATTERN,
        21,
    )
}

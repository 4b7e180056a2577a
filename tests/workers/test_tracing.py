"""Whether a process traces (the ``OTEL_*`` variables) and what an HTTP span keeps of a URL."""

from __future__ import annotations

from workers.tracing_env import configured


def test_tracing_is_on_only_when_the_otel_variables_ask_for_it():
    assert not configured({})
    assert not configured({"OTEL_SERVICE_NAME": "flowloom"}), "a name alone exports nothing"
    assert configured({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"})
    assert configured({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"})
    assert configured({"OTEL_TRACES_EXPORTER": "otlp"})
    assert not configured({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "none"})
    assert not configured({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"})


def test_an_http_span_keeps_no_query_fragment_or_user_info_of_a_url():
    from workers.tracing import safe_url

    assert safe_url("https://user:pw@api.example:8443/v1/x?api_key=s3cret#frag") == "https://api.example:8443/v1/x"
    assert safe_url("http://127.0.0.1/hook/a?token=t") == "http://127.0.0.1/hook/a"

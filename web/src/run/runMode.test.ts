import { describe, expect, it } from 'vitest';
import { runMode } from './runMode';

describe('runMode', () => {
  it('test_a_workflow_reading_the_message_shows_the_field_and_is_a_chat_flow', () => {
    expect(runMode(['history', 'query'], [])).toEqual({ showMessage: true, chatFlow: true });
    expect(runMode(['query'], ['topic'])).toEqual({ showMessage: true, chatFlow: true });
  });

  it('test_a_workflow_reading_nothing_hides_the_field_and_runs_in_the_run_tab', () => {
    expect(runMode([], ['name'])).toEqual({ showMessage: false, chatFlow: false });
    expect(runMode(['user_id', 'now'], [])).toEqual({ showMessage: false, chatFlow: false });
  });

  it('test_history_alone_is_a_chat_flow_without_a_message_field', () => {
    expect(runMode(['history'], [])).toEqual({ showMessage: false, chatFlow: true });
  });

  it('test_a_query_input_makes_a_chat_flow_the_input_field_takes_the_message', () => {
    expect(runMode([], ['query'])).toEqual({ showMessage: false, chatFlow: true });
  });

  it('test_before_any_validate_answer_the_field_stays', () => {
    expect(runMode(null, [])).toEqual({ showMessage: true, chatFlow: false });
    expect(runMode(null, ['query'])).toEqual({ showMessage: true, chatFlow: true });
  });
});

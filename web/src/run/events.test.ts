import { describe, expect, it } from 'vitest';
import { emptyRun, reduceFrame, statusesFromDetail } from './events';
import { isRunFrame, SseParser, type RunFrame, type SseFrame } from './sse';

/** A frame of the run stream, as the stream's reader takes it (through {@link isRunFrame}). */
function frame(raw: SseFrame): RunFrame {
  if (!isRunFrame(raw)) throw new Error(`not a run frame: ${JSON.stringify(raw)}`);
  return raw;
}

const ev = (type: string, seq: number, extra: Record<string, unknown> = {}): RunFrame =>
  frame({ event: type, id: seq, data: { type, seq, run_id: 'r1', ts: 0, attempt: 1, ...extra } });

describe('SseParser', () => {
  it('test_frames_split_across_chunks_are_joined', () => {
    const p = new SseParser();
    expect(p.push('event: meta\ndata: {"run_id":')).toEqual([]);
    const frames = p.push('"r1","chat_id":null}\n\n: keep-alive\n\nevent: node_started\nid: 2\r\ndata: {"a":1}\n\n');
    expect(frames).toEqual([
      { event: 'meta', id: null, data: { run_id: 'r1', chat_id: null } },
      { event: 'node_started', id: 2, data: { a: 1 } },
    ]);
  });

  it('test_comment_only_blocks_give_no_frame', () => {
    expect(new SseParser().push(': keep-alive\n\n: keep-alive\n\n')).toEqual([]);
  });
});

describe('reduceFrame citations', () => {
  it('test_a_chat_nodes_citations_are_collected_once', () => {
    const cite = { citation_id: '1', chunk_id: 'c9', source_name: 'returns.md', text: 'Refunds within 14 days.' };
    let run = reduceFrame(emptyRun(), ev('node_finished', 1, { node_id: 'kr', status: 'succeeded', outputs: { chunks: [] } }));
    expect(run.citations).toEqual([]);
    run = reduceFrame(run, ev('node_finished', 2, { node_id: 'chat', status: 'succeeded', outputs: { citations: [cite] } }));
    run = reduceFrame(run, ev('node_finished', 3, { node_id: 'chat2', status: 'succeeded', outputs: { citations: [cite] } }));
    expect(run.citations).toEqual([{ citation_id: '1', chunk_id: 'c9', source_name: 'returns.md', dataset_id: undefined,
      text: 'Refunds within 14 days.' }]);
    run = reduceFrame(run, ev('node_finished', 4, { node_id: 'x', status: 'failed', outputs: { citations: [{ citation_id: '2' }] } }));
    expect(run.citations).toHaveLength(1);
  });
});

describe('reduceFrame', () => {
  it('test_node_statuses_follow_the_events', () => {
    let run = reduceFrame(emptyRun(), frame({ event: 'meta', id: null, data: { run_id: 'r1', chat_id: null } }));
    run = reduceFrame(run, ev('node_started', 1, { node_id: 'a' }));
    expect(run.nodes.a.status).toBe('running');
    run = reduceFrame(run, ev('node_delta', 2, { node_id: 'a', text: 'Hel', channel: 'answer' }));
    run = reduceFrame(run, ev('node_delta', 3, { node_id: 'a', text: 'lo', channel: 'answer' }));
    run = reduceFrame(run, ev('node_delta', 4, { node_id: 'a', text: 'hmm', channel: 'reasoning' }));
    run = reduceFrame(run, ev('node_finished', 5, { node_id: 'a', status: 'succeeded', elapsed_ms: 12 }));
    run = reduceFrame(run, ev('node_finished', 6, { node_id: 'b', status: 'skipped', elapsed_ms: 0 }));
    expect(run.answer).toBe('Hello');
    expect(run.reasoning).toBe('hmm');
    expect(run.nodes).toEqual({ a: { status: 'succeeded', detail: '12 ms' }, b: { status: 'skipped', detail: '0 ms' } });
    expect(run.lastSeq).toBe(6);
    run = reduceFrame(run, ev('run_finished', 7, { answer: 'Hello', outputs: {} }));
    expect(run.status).toBe('succeeded');
  });

  it('test_run_finished_keeps_the_end_outputs', () => {
    let run = reduceFrame(emptyRun(), ev('run_started', 1, {}));
    expect(run.outputs).toBeNull();
    run = reduceFrame(run, ev('run_finished', 2, { answer: '', outputs: { lines: ['<a>', '<b>'], title: 'T' } }));
    expect(run.outputs).toEqual({ lines: ['<a>', '<b>'], title: 'T' });
  });

  it('test_interrupt_marks_node_waiting_and_resume_clears_it', () => {
    let run = reduceFrame(emptyRun(), ev('interrupt', 1, { interrupt_id: 'i1', node_id: 'ask', kind: 'user_select',
      payload: { options: [{ id: 'x' }] } }));
    run = reduceFrame(run, ev('run_paused', 2, { interrupts: [] }));
    expect(run.status).toBe('paused');
    expect(run.nodes.ask.status).toBe('waiting');
    expect(run.interrupts.map((i) => i.id)).toEqual(['i1']);
    run = reduceFrame(run, ev('run_resumed', 3, { answered: ['i1'] }));
    expect(run.interrupts).toEqual([]);
    expect(run.status).toBe('running');
  });

  it('test_cancel_marks_running_nodes_cancelled', () => {
    let run = reduceFrame(emptyRun(), ev('node_started', 1, { node_id: 'slow' }));
    run = reduceFrame(run, ev('run_cancelled', 2));
    expect(run.nodes.slow.status).toBe('cancelled');
    expect(run.status).toBe('cancelled');
  });

  it('test_error_frame_fails_a_running_stream', () => {
    const run = reduceFrame({ ...emptyRun(), status: 'running' }, { event: 'error', id: null,
      data: { error: { type: 'run_idle_timeout', message: 'idle' } } });
    expect(run.status).toBe('failed');
    expect(run.error).toBe('idle');
  });
});

describe('statusesFromDetail', () => {
  it('test_error_frame_shows_every_problem_whatever_its_shape', () => {
    const run = reduceFrame(emptyRun(), { event: 'error', id: null, data: { error: { type: 'invalid_inputs',
      message: 'the inputs do not fit the workflow', problems: ["'name' is required (string)", { node_id: 'llm', message: 'no model' }] } } });
    expect(run.status).toBe('failed');
    expect(run.error).toBe("the inputs do not fit the workflow: 'name' is required (string); llm: no model");
  });

  it('test_last_round_of_a_loop_body_node_is_shown', () => {
    expect(statusesFromDetail([
      { node_id: 'a', status: 'succeeded', duration_s: 0.5 },
      { node_id: 'b', status: 'failed', error: { message: 'boom' } },
      { node_id: 'c', status: 'succeeded', loop_id: 'L' },
      { node_id: 'c', status: 'failed', loop_id: 'L' },
      { node_id: 'd', status: 'pending' },
    ])).toEqual({ a: { status: 'succeeded', detail: '500 ms' }, b: { status: 'failed', detail: 'boom' },
      c: { status: 'failed', detail: undefined } });
  });
});

/** A sticky note: free text on the canvas (kept in this browser; see store/editor.ts). */
import { NodeResizer, type NodeProps } from '@xyflow/react';
import { memo } from 'react';
import { useT } from '../i18n';
import type { NoteNode } from '../lib/serialize';
import { useEditor } from '../store/editor';

function NoteNodeViewImpl({ id, data, selected }: NodeProps<NoteNode>) {
  const t = useT();
  const updateNote = useEditor((s) => s.updateNote);
  return (
    <div className="note-node" data-testid={`note-${id}`}>
      <NodeResizer isVisible={!!selected} minWidth={120} minHeight={60} />
      <textarea className="nodrag" value={data.text} placeholder={t('note.placeholder')}
        onChange={(e) => updateNote(id, e.target.value)} onKeyDown={(e) => e.stopPropagation()} />
    </div>
  );
}

export const NoteNodeView = memo(NoteNodeViewImpl);
